//! Whose an account or a database is. A declaration makes what it names, or takes over what
//! exists only when asked to: taking over an account resets its password and revokes what it
//! held beyond the declaration, and `deletionPolicy: Delete` later drops it, so an object
//! naming an account someone else made (an application's, another tool's) must not do any of
//! that by accident. What a declaration made or took over is recorded beside it (a
//! MySQLUser's status, `moco local`'s record file), the record written before the server is
//! changed.

use serde::{Deserialize, Serialize};

/// How a declaration came to hold what it names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub enum Ownership {
    /// It did not exist; the declaration made it.
    Created,
    /// It existed; the declaration took it over (asked to, or applied by an earlier release,
    /// which took over whatever it found).
    Adopted,
}

/// What a declaration may do with the name it declares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Claim {
    /// Already its own: converge.
    Keep(Ownership),
    /// Record this, then converge (create, or take over).
    Record(Ownership),
    /// It exists and is not the declaration's, which did not ask to take it over: change
    /// nothing.
    Refuse,
}

/// The claim of a declaration on a name that `exists` on the server, given what it
/// recorded (`owned`), whether it asks to take over an existing one (`adopt`), and whether an
/// earlier release applied it (`applied_before`: its status says so, with no record: those
/// releases took over whatever they found, and keep doing so).
pub fn claim(exists: bool, owned: Option<Ownership>, adopt: bool, applied_before: bool) -> Claim {
    match (owned, exists) {
        (Some(o), _) => Claim::Keep(o),
        (None, false) => Claim::Record(Ownership::Created),
        (None, true) if adopt || applied_before => Claim::Record(Ownership::Adopted),
        (None, true) => Claim::Refuse,
    }
}

/// Whether a deletion with `deletionPolicy: Delete` may drop what the declaration names:
/// only what it made or took over.
pub fn may_drop(owned: Option<Ownership>) -> bool {
    owned.is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_declaration_takes_over_only_when_asked_or_applied_before() {
        use Ownership::{Adopted, Created};
        // (exists, owned, adopt, applied_before) -> claim
        let cases = [
            ((false, None, false, false), Claim::Record(Created)),
            ((false, None, true, false), Claim::Record(Created)),
            ((true, None, false, false), Claim::Refuse),
            ((true, None, true, false), Claim::Record(Adopted)),
            ((true, None, false, true), Claim::Record(Adopted)),
            ((true, Some(Created), false, false), Claim::Keep(Created)),
            // Dropped by hand after it was made: made again, still its own.
            ((false, Some(Created), false, false), Claim::Keep(Created)),
            ((true, Some(Adopted), false, false), Claim::Keep(Adopted)),
        ];
        for ((exists, owned, adopt, before), want) in cases {
            assert_eq!(
                claim(exists, owned, adopt, before),
                want,
                "{exists} {owned:?} {adopt} {before}"
            );
        }
        assert!(!may_drop(None));
        assert!(may_drop(Some(Created)) && may_drop(Some(Adopted)));
    }
}
