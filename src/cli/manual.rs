//! `galewatch manpages` and `completions`: generated from the command line, for the package.

use std::process::ExitCode;

use super::*;

/// Writes the man pages into `dir` (`tools/manual.rs`).
pub(super) fn write_manpages(dir: &std::path::Path) -> ExitCode {
    let cmd = <Cli as clap::CommandFactory>::command();
    match galewatch::tools::manual::write_pages(cmd, dir) {
        Ok(n) => {
            galewatch::say!("galewatch: wrote {n} man pages to {}", dir.display());
            ExitCode::SUCCESS
        }
        Err(e) => {
            galewatch::say!(
                "galewatch: cannot write the man pages to {}: {e}",
                dir.display()
            );
            ExitCode::FAILURE
        }
    }
}

/// Completions for `shell` on stdout (a closed pipe is not an error).
pub(super) fn print_completions(shell: clap_complete::Shell) -> ExitCode {
    use std::io::Write;
    let mut cmd = <Cli as clap::CommandFactory>::command();
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut cmd, "galewatch", &mut out);
    let _ = std::io::stdout().write_all(&out);
    ExitCode::SUCCESS
}
