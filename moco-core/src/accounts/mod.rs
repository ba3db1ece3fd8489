//! Accounts and databases as code (MySQLUser, MySQLDatabase, `moco local apply`): what is
//! declared and what the server holds, compared by pure functions, so that the operator and
//! `moco local` make the same changes and a test can name each one. The adapters read the
//! server and run the changes as SQL; nothing here sees a password.

pub mod claim;
pub mod model;
pub mod plan;
pub mod target;

pub use claim::{Claim, Ownership, claim, may_drop};
pub use model::{
    AccountSpec, DatabaseSpec, GrantLevel, GrantTarget, Grants, ObservedAccount, ObservedDatabase,
    Privilege, quote_identifier,
};
pub use plan::{AccountChange, DatabaseChange, plan_account, plan_database};
pub use target::escape_wildcards;
