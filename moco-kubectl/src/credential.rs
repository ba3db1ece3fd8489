//! `kubectl moco credential`: a user's password from the Secret `moco-<cluster>`, alone or as
//! a `[client]` option file.

use std::io::Write;

use moco_core::option_file::quote_value;

use crate::cli::{CredentialAction, CredentialArgs, CredentialFormat, MysqlUser};
use crate::context::Context;
use crate::error::Error;
use crate::objects;

/// What `credential` prints for `user` whose password is `password`: the password and a
/// newline, or MOCO's `[client]` snippet (user bare, password quoted).
pub fn render(user: MysqlUser, password: &str, format: CredentialFormat) -> String {
    match format {
        CredentialFormat::Plain => format!("{password}\n"),
        CredentialFormat::Mycnf => format!(
            "[client]\nuser={}\npassword={}\n",
            user.account().name(),
            quote_value(password)
        ),
    }
}

/// Runs `credential`.
pub async fn run(ctx: &Context, args: &CredentialArgs, out: &mut dyn Write) -> Result<(), Error> {
    if let Some(CredentialAction::Rotate(rotate)) = &args.action {
        return crate::rotate::run(ctx, rotate, out).await;
    }
    let cluster = args.cluster.as_deref().unwrap_or_default();
    let password = objects::password(ctx, cluster, args.user.account()).await?;
    out.write_all(render(args.user, &password, args.format).as_bytes())?;
    Ok(())
}
