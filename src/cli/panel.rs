//! `galewatch panel`: the engineers' panel, and `panel hash-password`, a users file's line.

use std::process::ExitCode;

use galewatch::daemon::config;

use super::*;

#[derive(Subcommand)]
pub(crate) enum PanelCommand {
    /// Print a line of the panel's users file (panel_users_file) for NAME: the password is read
    /// from standard input (asked twice, not echoed, on a terminal), the line written is
    /// NAME:$argon2id$… Exit 2 for an empty password or a name HTTP Basic cannot carry.
    HashPassword {
        /// The user name (no `:`, no white space).
        name: String,
    },
}

/// `galewatch panel`: serves the panel on `listen` (default: the panel_listen setting) until a
/// signal stops it.
pub(super) fn panel_cmd(
    runtime: &tokio::runtime::Runtime,
    config: ConfigArg,
    listen: Option<std::net::SocketAddr>,
) -> ExitCode {
    let cfg = match config::load(config.config.as_deref()) {
        Ok(c) => c,
        Err(e) => return config_error(e),
    };
    let listen = listen.unwrap_or(cfg.panel_listen);
    let access = match galewatch::panel::access::Access::from_settings(&cfg.settings, listen) {
        Ok(a) => a,
        Err(e) => return config_error(e),
    };
    runtime.block_on(async {
        let shutdown = galewatch::daemon::shutdown_on_signal();
        report(galewatch::panel::run(cfg, listen, access, shutdown).await)
    })
}

/// `galewatch panel hash-password NAME`: the users file's line for NAME.
pub(super) fn hash_password_cmd(name: &str) -> ExitCode {
    use galewatch::panel::auth;
    if let Some(why) = auth::bad_name(name) {
        galewatch::say!("galewatch: {why}");
        return ExitCode::from(2);
    }
    let password = match read_password(name) {
        Ok(p) => p,
        Err(e) => {
            galewatch::say!("galewatch: {e}");
            return ExitCode::from(2);
        }
    };
    if password.is_empty() {
        galewatch::say!("galewatch: an empty password: the panel never accepts one");
        return ExitCode::from(2);
    }
    print_out(&format!("{name}:{}", auth::hash_password(&password)))
}

/// The password on standard input's first line (its line end dropped); on a terminal, asked
/// for twice without echo.
fn read_password(name: &str) -> Result<String, String> {
    use std::io::{BufRead, IsTerminal, Write};
    let stdin = std::io::stdin();
    let line = || -> Result<String, String> {
        let mut s = String::new();
        stdin
            .lock()
            .read_line(&mut s)
            .map_err(|e| format!("reading the password: {e}"))?;
        let s = s.strip_suffix('\n').unwrap_or(&s);
        Ok(s.strip_suffix('\r').unwrap_or(s).to_string())
    };
    if !stdin.is_terminal() {
        return line();
    }
    let ask = |prompt: &str| -> Result<String, String> {
        let _ = write!(std::io::stderr(), "{prompt}");
        let _ = std::io::stderr().flush();
        let echo = Echo::off();
        let p = line();
        drop(echo);
        galewatch::say!();
        p
    };
    let first = ask(&format!("Password for {name}: "))?;
    if first.is_empty() {
        return Ok(first);
    }
    if ask("Again: ")? != first {
        return Err("the two passwords differ; nothing written".into());
    }
    Ok(first)
}

/// The terminal's echo, off until dropped.
struct Echo(Option<libc::termios>);

impl Echo {
    fn off() -> Echo {
        // SAFETY: tcgetattr and tcsetattr on standard input with a termios the call fills.
        unsafe {
            let mut t: libc::termios = std::mem::zeroed();
            if libc::tcgetattr(libc::STDIN_FILENO, &mut t) != 0 {
                return Echo(None);
            }
            let saved = t;
            t.c_lflag &= !libc::ECHO;
            if libc::tcsetattr(libc::STDIN_FILENO, libc::TCSANOW, &t) != 0 {
                return Echo(None);
            }
            Echo(Some(saved))
        }
    }
}

impl Drop for Echo {
    fn drop(&mut self) {
        if let Some(saved) = self.0 {
            // SAFETY: restores the settings tcgetattr gave.
            unsafe {
                libc::tcsetattr(libc::STDIN_FILENO, libc::TCSANOW, &saved);
            }
        }
    }
}
