//! Build script: records the commit the binary is built from, for `galewatch --version` and the
//! `galewatch_build_info` metric, as `BUILT_FROM_COMMIT`. `SOURCE_COMMIT` overrides it (a build
//! from a tarball, where there is no git); without either it is `unknown`.
//!
//! Neither name starts with `GALEWATCH_`: cargo also sets the variable when it runs the tests,
//! and every `GALEWATCH_*` variable is a setting (an unknown one is refused).

use std::path::Path;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=SOURCE_COMMIT");
    // A new commit or checkout moves HEAD or its log. Git says where they are: in a worktree
    // `.git` is a file, and they live under the main checkout's `.git/worktrees/`.
    let git_paths = Command::new("git")
        .args(["rev-parse", "--git-path", "HEAD", "--git-path", "logs/HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    for p in git_paths.lines() {
        if Path::new(p).exists() {
            println!("cargo:rerun-if-changed={p}");
        }
    }
    let commit = std::env::var("SOURCE_COMMIT")
        .ok()
        .filter(|c| !c.trim().is_empty())
        .or_else(|| {
            let out = Command::new("git")
                .args(["rev-parse", "--short=12", "HEAD"])
                .output()
                .ok()?;
            out.status
                .success()
                .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=BUILT_FROM_COMMIT={commit}");
}
