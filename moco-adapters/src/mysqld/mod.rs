//! Starting, stopping and initialising local `mariadbd` / `mysqld` processes.
