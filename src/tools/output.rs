//! Where `--output PATH` writes, by what PATH is: a new name or a regular file is written whole
//! or not at all (a hidden temporary file beside it, renamed over it once complete); a FIFO or a
//! character device is written directly, as the shell's `>` would; a symbolic link is followed
//! to what it names; anything else is refused before anything is read.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::tools::review::ReviewError;

/// What `--output` names, as found when the command starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A new name, or a regular file (through any symbolic links): written beside it and renamed
    /// over it. `file` is the name replaced (a link's target, so the link stays a link).
    Replace { file: PathBuf },
    /// A FIFO or a character device (`/dev/null`, a terminal): opened and written in place.
    Direct,
    /// This process's own standard output (`/dev/stdout`, `/proc/self/fd/1`), whatever it is: it
    /// is written as stdout is, so `--output /dev/stdout >> log` appends as `>>` asked.
    Stdout,
}

/// The kind of thing a path names, as far as `--output` cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Missing,
    Regular,
    Fifo,
    CharDevice,
    Directory,
    BlockDevice,
    Socket,
}

impl Kind {
    /// The kind of the file `metadata` describes.
    pub fn of(metadata: &std::fs::Metadata) -> Kind {
        use std::os::unix::fs::FileTypeExt;
        let t = metadata.file_type();
        if t.is_file() {
            Kind::Regular
        } else if t.is_dir() {
            Kind::Directory
        } else if t.is_fifo() {
            Kind::Fifo
        } else if t.is_char_device() {
            Kind::CharDevice
        } else if t.is_block_device() {
            Kind::BlockDevice
        } else {
            Kind::Socket
        }
    }

    /// What `--output` does with a path of this kind (`file`: the name a replacement renames
    /// over), or why it refuses it.
    pub fn target(self, file: PathBuf) -> Result<Target, &'static str> {
        match self {
            Kind::Missing | Kind::Regular => Ok(Target::Replace { file }),
            Kind::Fifo | Kind::CharDevice => Ok(Target::Direct),
            Kind::Directory => Err("is a directory: name a file"),
            Kind::BlockDevice => {
                Err("is a block device: name a file, a FIFO or a character device")
            }
            Kind::Socket => Err("is a socket: name a file, a FIFO or a character device"),
        }
    }
}

/// What `--output path` will do, or why not (the command exits 2 naming it, before reading
/// anything): a directory, a block device, a socket, a link to nothing, a name in a directory
/// that does not exist.
pub fn target(path: &Path) -> Result<Target, String> {
    let named = |why: &dyn std::fmt::Display| format!("--output {}: {why}", path.display());
    if path.as_os_str().is_empty() {
        return Err("--output names no file".into());
    }
    if path.as_os_str().to_string_lossy().ends_with('/') {
        return Err(named(if path.is_dir() {
            &"is a directory: name a file"
        } else {
            &"ends with '/', which names a directory: name a file"
        }));
    }
    if is_stdout(path) {
        return Ok(Target::Stdout);
    }
    let link = std::fs::symlink_metadata(path);
    let kind = match std::fs::metadata(path) {
        Ok(m) => Kind::of(&m),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if link.is_ok() {
                let to = std::fs::read_link(path)
                    .map_or_else(|_| "?".into(), |t| t.display().to_string());
                return Err(named(&format!(
                    "is a symbolic link to {to}, which does not exist"
                )));
            }
            Kind::Missing
        }
        Err(e) => return Err(named(&e)),
    };
    let file = match kind {
        Kind::Regular if link.is_ok_and(|m| m.file_type().is_symlink()) => {
            std::fs::canonicalize(path).map_err(|e| named(&e))?
        }
        _ => path.to_path_buf(),
    };
    if kind == Kind::Missing {
        if let Some(d) = file.parent().filter(|d| !d.as_os_str().is_empty()) {
            if !d.is_dir() {
                return Err(named(&format!(
                    "the directory {} does not exist",
                    d.display()
                )));
            }
        }
    }
    kind.target(file).map_err(|why| named(&why))
}

/// Whether `path` is this process's standard output (the same file, by device and inode).
fn is_stdout(path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let Ok(named) = std::fs::metadata(path) else {
        return false;
    };
    let Ok(out) = std::fs::metadata("/proc/self/fd/1") else {
        return false;
    };
    named.dev() == out.dev() && named.ino() == out.ino()
}

/// The longest file name a temporary file's prefix takes from the target's (a file system takes
/// 255 bytes in all; the rest is `.`, the random part and `.partial`).
const PARTIAL_NAME_BYTES: usize = 200;

/// The hidden temporary file's prefix for a target named `name`: `.NAME.`, the name cut to
/// [`PARTIAL_NAME_BYTES`] on a character boundary.
fn partial_prefix(name: &str) -> String {
    let mut end = name.len().min(PARTIAL_NAME_BYTES);
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    format!(".{}.", &name[..end])
}

/// An open `--output`: a temporary file to be renamed over the target, or the target itself.
pub enum Output {
    Replace {
        path: PathBuf,
        file: PathBuf,
        tmp: tempfile::NamedTempFile,
    },
    Direct {
        path: PathBuf,
        file: File,
    },
    Stdout(std::io::Stdout),
}

impl Output {
    /// Opens `path` as [`target`] says: a temporary file beside what it replaces (created as
    /// any new file, under the umask; removed if this is dropped before [`Output::finish`]), or
    /// the FIFO or device itself (which waits, as `>` does, for a FIFO's reader). Blocking: run
    /// it where a wait harms no one.
    pub fn open(path: &Path) -> Result<Output, ReviewError> {
        let refused = |e: &dyn std::fmt::Display| {
            ReviewError::Refused(format!("--output {}: {e}", path.display()))
        };
        match target(path).map_err(ReviewError::Refused)? {
            Target::Stdout => Ok(Output::Stdout(std::io::stdout())),
            Target::Direct => {
                let file = std::fs::OpenOptions::new()
                    .write(true)
                    .open(path)
                    .map_err(|e| refused(&e))?;
                Ok(Output::Direct {
                    path: path.to_path_buf(),
                    file,
                })
            }
            Target::Replace { file } => {
                let name = file
                    .file_name()
                    .ok_or_else(|| refused(&"names no file"))?
                    .to_string_lossy()
                    .into_owned();
                let dir = match file.parent() {
                    Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
                    _ => PathBuf::from("."),
                };
                let tmp = tempfile::Builder::new()
                    .prefix(&partial_prefix(&name))
                    .suffix(".partial")
                    .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o666))
                    .tempfile_in(dir)
                    .map_err(|e| refused(&e))?;
                Ok(Output::Replace {
                    path: path.to_path_buf(),
                    file,
                    tmp,
                })
            }
        }
    }

    pub fn writer(&mut self) -> std::io::BufWriter<&mut (dyn Write + Send)> {
        let f: &mut (dyn Write + Send) = match self {
            Output::Replace { tmp, .. } => tmp.as_file_mut(),
            Output::Direct { file, .. } => file,
            Output::Stdout(out) => out,
        };
        std::io::BufWriter::with_capacity(1 << 16, f)
    }

    /// Ends the output: the temporary file renamed over the target — only if the target is
    /// still a regular file or still missing (else refused, the temporary file removed and the
    /// target untouched) — or the direct writes flushed.
    pub fn finish(self) -> Result<(), ReviewError> {
        match self {
            Output::Direct { path, mut file } => file
                .flush()
                .map_err(|e| ReviewError::Refused(format!("--output {}: {e}", path.display()))),
            Output::Stdout(mut out) => out
                .flush()
                .map_err(|e| ReviewError::Refused(format!("--output (stdout): {e}"))),
            Output::Replace { path, file, tmp } => {
                let refused = |e: &dyn std::fmt::Display| {
                    ReviewError::Refused(format!("--output {}: {e}", path.display()))
                };
                let now = match std::fs::symlink_metadata(&file) {
                    Ok(m) => Kind::of(&m),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => Kind::Missing,
                    Err(e) => return Err(refused(&e)),
                };
                if !matches!(now, Kind::Regular | Kind::Missing) {
                    return Err(refused(&format!(
                        "{} changed while the export ran and is no longer a regular file: left as it is",
                        file.display()
                    )));
                }
                tmp.persist(&file)
                    .map(|_| ())
                    .map_err(|e| refused(&e.error))
            }
        }
    }

    /// The hidden temporary file, while there is one.
    pub fn partial(&self) -> Option<&Path> {
        match self {
            Output::Replace { tmp, .. } => Some(tmp.path()),
            Output::Direct { .. } | Output::Stdout(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_has_one_meaning() {
        let f = PathBuf::from("x");
        for (kind, want) in [
            (Kind::Missing, Some(Target::Replace { file: f.clone() })),
            (Kind::Regular, Some(Target::Replace { file: f.clone() })),
            (Kind::Fifo, Some(Target::Direct)),
            (Kind::CharDevice, Some(Target::Direct)),
            (Kind::Directory, None),
            (Kind::BlockDevice, None),
            (Kind::Socket, None),
        ] {
            assert_eq!(kind.target(f.clone()).ok(), want, "{kind:?}");
        }
    }

    #[test]
    fn paths_are_told_apart_before_anything_is_written() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let regular = d.join("a.csv");
        std::fs::write(&regular, "old").unwrap();
        std::os::unix::fs::symlink(&regular, d.join("link.csv")).unwrap();
        std::os::unix::fs::symlink(d.join("gone.csv"), d.join("dangling.csv")).unwrap();
        assert_eq!(
            target(&regular),
            Ok(Target::Replace {
                file: regular.clone()
            })
        );
        assert_eq!(
            target(&d.join("new.csv")),
            Ok(Target::Replace {
                file: d.join("new.csv")
            })
        );
        assert_eq!(
            target(&d.join("link.csv")),
            Ok(Target::Replace {
                file: std::fs::canonicalize(&regular).unwrap()
            })
        );
        assert_eq!(target(Path::new("/dev/null")), Ok(Target::Direct));
        for (p, says) in [
            (d.to_path_buf(), "is a directory"),
            (d.join("dangling.csv"), "which does not exist"),
            (d.join("no/such/dir/x.csv"), "does not exist"),
            (
                PathBuf::from(format!("{}/", regular.display())),
                "names a directory",
            ),
        ] {
            let e = target(&p).unwrap_err();
            assert!(e.contains(says), "{p:?}: {e}");
        }
    }

    #[test]
    fn a_replaced_link_stays_a_link_and_a_dropped_output_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let real = d.join("real.csv");
        std::fs::write(&real, "old").unwrap();
        let link = d.join("link.csv");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let mut out = Output::open(&link).unwrap();
        out.writer().write_all(b"new").unwrap();
        out.finish().unwrap();
        assert!(std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(std::fs::read_to_string(&real).unwrap(), "new");
        let out = Output::open(&real).unwrap();
        let partial = out.partial().unwrap().to_path_buf();
        assert!(partial.exists());
        drop(out);
        assert!(!partial.exists());
        assert_eq!(std::fs::read_to_string(&real).unwrap(), "new");
    }

    #[test]
    fn a_long_name_still_gets_a_partial_file_within_the_file_system_s_limit() {
        let dir = tempfile::tempdir().unwrap();
        let name = format!("{}é.csv", "x".repeat(245));
        assert!(name.len() <= 255);
        let p = dir.path().join(&name);
        let mut out = Output::open(&p).unwrap();
        assert!(out.partial().unwrap().file_name().unwrap().len() <= 255);
        out.writer().write_all(b"rows").unwrap();
        out.finish().unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "rows");
        assert_eq!(partial_prefix("aé"), ".aé.");
        let cut = partial_prefix(&"é".repeat(150));
        assert!(
            cut.len() <= PARTIAL_NAME_BYTES + 2 && cut.ends_with("é."),
            "{cut}"
        );
    }

    #[test]
    fn a_target_that_stops_being_a_file_is_not_renamed_over() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.csv");
        let mut out = Output::open(&p).unwrap();
        out.writer().write_all(b"rows").unwrap();
        std::fs::create_dir(&p).unwrap();
        let e = out.finish().unwrap_err().to_string();
        assert!(e.contains("no longer a regular file"), "{e}");
        assert!(p.is_dir());
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(left.len(), 1, "the partial file removed: {left:?}");
    }
}
