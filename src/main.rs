//! The `galewatch` command: parse the command line, set up logging and the runtime, and run the
//! command (`cli/`, one command a file).

use std::process::ExitCode;

use clap::Parser;

mod cli;

/// glibc raises its mmap threshold each time a large block is freed, after which buffers of a
/// megabyte (large messages, Sparkplug B births) come from the heap and stay there, fragmented,
/// once freed: 400 births of a megabyte peaked 40 MiB higher than with the threshold fixed. A
/// fixed threshold gives them back at once. An operator's `MALLOC_MMAP_THRESHOLD_` wins.
fn tune_allocator() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if std::env::var_os("MALLOC_MMAP_THRESHOLD_").is_none() {
        // SAFETY: mallopt only sets a tunable of glibc's allocator; called before any thread
        // is started.
        unsafe {
            libc::mallopt(libc::M_MMAP_THRESHOLD, 128 * 1024);
        }
    }
}

fn main() -> ExitCode {
    tune_allocator();
    let cli = cli::Cli::parse();
    if let Some(done) = cli::early(&cli.command) {
        return done;
    }
    cli::init_logging(&cli.command);
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            galewatch::say!("galewatch: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    cli::run(cli.command, &runtime)
}
