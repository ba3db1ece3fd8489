//! Printing that cannot fail. The output may be a pipe the reader already closed (`moco crd |
//! head`, `… | tee log` ended by Ctrl-C): `println!` then panics. A command's output that
//! nobody reads is not an error of the command, and stopping servers must never depend on
//! being able to print. `moco local`'s commands print their progress lines through here; the
//! `moco` binary's other commands use it too.

use std::io::Write as _;

/// Writes `text` to standard output; a closed or failing output is ignored.
pub fn print_out(text: &str) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes());
    let _ = out.flush();
}

/// Writes `text` to standard error; a closed or failing output is ignored.
pub fn print_err(text: &str) {
    let mut err = std::io::stderr().lock();
    let _ = err.write_all(text.as_bytes());
}

/// `println!` to standard output through [`print_out`] (used as `output::out!`).
#[doc(hidden)]
#[macro_export]
macro_rules! __output_out {
    ($($arg:tt)*) => {
        $crate::output::print_out(&format!("{}\n", format_args!($($arg)*)))
    };
}

/// `eprintln!` through [`print_err`] (used as `output::err!`).
#[doc(hidden)]
#[macro_export]
macro_rules! __output_err {
    ($($arg:tt)*) => {
        $crate::output::print_err(&format!("{}\n", format_args!($($arg)*)))
    };
}

#[doc(inline)]
pub use {__output_err as err, __output_out as out};
