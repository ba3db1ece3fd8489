//! MySQL and MariaDB over `mysql_async`: the [`crate::ports::MysqlPort`] implementation and instance initialisation.
