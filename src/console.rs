//! What the commands say on the terminal: `eprintln!` and `println!` that never panic.
//!
//! The standard macros panic when the stream is a closed pipe (`galewatch … 2>&1 | head -0`),
//! which ends the process with exit 101 and a panic message nobody asked for, instead of the
//! command's own exit status. These drop what cannot be written: a message nobody can read
//! changes nothing, and the exit status still says how the command ended.

/// `eprintln!` that drops what standard error cannot take instead of panicking.
#[macro_export]
macro_rules! say {
    ($($arg:tt)*) => {{
        use ::std::io::Write as _;
        let _ = ::std::writeln!(::std::io::stderr(), $($arg)*);
    }};
}

/// `println!` that drops what standard output cannot take instead of panicking (for messages;
/// a command whose output is its data checks its writes and says when one fails).
#[macro_export]
macro_rules! tell {
    ($($arg:tt)*) => {{
        use ::std::io::Write as _;
        let _ = ::std::writeln!(::std::io::stdout(), $($arg)*);
    }};
}

#[cfg(test)]
mod tests {
    #[test]
    fn they_take_what_the_standard_macros_take() {
        // Compiles as the standard ones do: no arguments, a literal, captured and positional.
        let n = 3;
        say!();
        say!("plain");
        say!("{n} captured, {} positional", n + 1);
        tell!("{n:>4}");
    }
}
