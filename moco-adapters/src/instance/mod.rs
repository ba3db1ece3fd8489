//! Procedures that run next to one mysqld: initialise its datadir, create MOCO's accounts,
//! and copy another instance's data onto it.
//!
//! They take everything that differs between callers as parameters — the datadir, the
//! my.cnf, the tool paths, the server's address and, for a clone, the byte stream the backup
//! arrives on — so that `moco local`, the in-pod agent and the init container run the same
//! code. Nothing here knows a cluster directory, a Secret or a Pod.
//!
//! * [`datadir`]: `mariadb-install-db` / `mysqld --initialize-insecure`, once per datadir;
//! * [`accounts`]: MOCO's eight accounts on a fresh server ([`crate::mysql::initialize`]);
//! * [`clone`]: MariaDB's streamed physical copy (donor: [`clone::start_backup`];
//!   recipient: [`clone::extract`], [`clone::prepare`], [`clone::seed`]) and MySQL's
//!   `CLONE INSTANCE` ([`clone::clone_instance_from`]).

pub mod accounts;
pub mod clone;
pub mod datadir;
pub mod error;
pub mod rekey;

pub use error::InstanceError;
