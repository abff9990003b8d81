//! Output paths (`dot -o`, `import -o`, `run --trace`, `bench --out`): one helper,
//! [`write_atomic`], decides from what is at the path how to write it, so that an output
//! never destroys what it is written to.
//!
//! | at the path | what happens |
//! |---|---|
//! | nothing | a new file: written beside it as a temporary, then renamed into place |
//! | a regular file | replaced atomically the same way; the new file keeps the old one's permission bits (and, where allowed, its owner and group) |
//! | a character device (`/dev/null`, a terminal) or a FIFO | written through: opened for writing (not created, not truncated) and written; not atomic, and opening a FIFO waits for its reader, as a shell's `>` does |
//! | a symbolic link | followed (at most [`MAX_LINKS`] links) to its target, which is treated by these rules; the link itself stays; a dangling link creates its target |
//! | a folder, a block device, a socket | refused with an error naming what is there |
//!
//! Replacing by rename (rather than truncating and rewriting in place) is what makes a
//! failed write (disk full, a killed process) leave the old file whole; it also means a
//! regular file with several hard links is split from them, as every editor's atomic
//! save does. What is at the path is looked at once, just before writing: a path changed
//! by someone else meanwhile is written under what it was then.

use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// Symbolic links followed before giving up (Linux's own limit, `ELOOP`).
pub const MAX_LINKS: usize = 40;

/// How an output path is written ([`resolve`]).
#[derive(Debug)]
enum Target {
    /// Nothing there: a new file at this (link-resolved) path.
    Create(PathBuf),
    /// A regular file: replaced by rename, keeping its metadata.
    Replace(PathBuf, std::fs::Metadata),
    /// A character device or a FIFO: opened and written.
    Through(PathBuf),
}

/// Writes `bytes` to `path` by what is there (the table in this module's docs): a new or
/// regular file all or nothing, through a temporary file beside it (`.NAME.PID.N.tmp`,
/// created exclusively) renamed over it (atomic within one file system), keeping the
/// old file's mode; a new file gets mode `0o666` less the umask, as `fs::write` gives.
/// A failed write leaves any existing regular file as it was and removes the temporary.
/// A character device or FIFO is written through; a symbolic link is followed.
///
/// Errors: the folder cannot take a new file, the write fails (disk full), the rename
/// fails, or the path is a folder, block device or socket, or a loop of links; the
/// error is the OS's (or says what is at the path), the caller names `path`.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    match resolve(path)? {
        Target::Create(p) => replace(&p, bytes, None),
        Target::Replace(p, old) => replace(&p, bytes, Some(&old)),
        Target::Through(p) => {
            let mut f = std::fs::OpenOptions::new().write(true).open(&p)?;
            f.write_all(bytes)?;
            f.flush()
        }
    }
}

/// Checks up front that [`write_atomic`] can write `path`, so a long run does not end
/// with its output lost: for a new or regular file, that a file can be created beside
/// it (its folder exists and is writable); for a character device or FIFO, that it is
/// writable (checked with `access(2)`, without opening it: opening a FIFO would wait
/// for a reader); anything else is the error [`write_atomic`] would give.
pub fn check_writable(path: &Path) -> io::Result<()> {
    match resolve(path)? {
        Target::Create(p) | Target::Replace(p, _) => {
            let (tmp, f) = temp_beside(&p)?;
            drop(f);
            std::fs::remove_file(tmp)
        }
        Target::Through(p) => writable(&p),
    }
}

/// What is at `path`, links followed.
fn resolve(path: &Path) -> io::Result<Target> {
    let mut p = path.to_path_buf();
    for _ in 0..=MAX_LINKS {
        let meta = match std::fs::symlink_metadata(&p) {
            Ok(m) => m,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Target::Create(p)),
            Err(e) => return Err(e),
        };
        let ty = meta.file_type();
        if ty.is_symlink() {
            let to = std::fs::read_link(&p)?;
            p = match p.parent() {
                Some(dir) if to.is_relative() => dir.join(to),
                _ => to,
            };
            continue;
        }
        if ty.is_file() {
            return Ok(Target::Replace(p, meta));
        }
        if ty.is_dir() {
            return Err(refuse(&p, path, "a folder"));
        }
        return special(p, path, &meta);
    }
    Err(io::Error::other(format!(
        "more than {MAX_LINKS} symbolic links to follow (a loop?)"
    )))
}

/// A path that is neither a file, a folder nor a link: written through if a character
/// device or FIFO, else refused.
#[cfg(unix)]
fn special(p: PathBuf, asked: &Path, meta: &std::fs::Metadata) -> io::Result<Target> {
    use std::os::unix::fs::FileTypeExt;
    let ty = meta.file_type();
    if ty.is_char_device() || ty.is_fifo() {
        Ok(Target::Through(p))
    } else if ty.is_block_device() {
        Err(refuse(&p, asked, "a block device"))
    } else if ty.is_socket() {
        Err(refuse(&p, asked, "a socket"))
    } else {
        Err(refuse(&p, asked, "not a regular file"))
    }
}

#[cfg(not(unix))]
fn special(p: PathBuf, asked: &Path, _meta: &std::fs::Metadata) -> io::Result<Target> {
    Err(refuse(&p, asked, "not a regular file"))
}

fn refuse(p: &Path, asked: &Path, what: &str) -> io::Error {
    let via = if p == asked {
        String::new()
    } else {
        format!(" (`{}`, where the link leads)", p.display())
    };
    io::Error::other(format!(
        "it is {what}{via}; an output path is a regular file (replaced atomically), a \
         character device or a FIFO (written through), or nothing yet"
    ))
}

/// Writes a temporary beside `path`, gives it `old`'s owner and mode, renames it over.
fn replace(path: &Path, bytes: &[u8], old: Option<&std::fs::Metadata>) -> io::Result<()> {
    let (tmp, mut f) = temp_beside(path)?;
    let written = keep_metadata(&f, old)
        .and_then(|()| f.write_all(bytes))
        .and_then(|()| f.flush())
        .and_then(|()| std::fs::rename(&tmp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// The replaced file's owner and group (best effort: only a privileged process may give
/// a file away, and a user who may write the folder but not chown keeps the new file as
/// theirs, as an editor's save does), then its permission bits (after the owner, which
/// would clear set-id bits).
#[cfg(unix)]
fn keep_metadata(f: &std::fs::File, old: Option<&std::fs::Metadata>) -> io::Result<()> {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let Some(old) = old else { return Ok(()) };
    let new = f.metadata()?;
    if (new.uid(), new.gid()) != (old.uid(), old.gid()) {
        let _ = std::os::unix::fs::fchown(f, Some(old.uid()), Some(old.gid()));
    }
    f.set_permissions(std::fs::Permissions::from_mode(old.mode() & 0o7777))
}

#[cfg(not(unix))]
fn keep_metadata(f: &std::fs::File, old: Option<&std::fs::Metadata>) -> io::Result<()> {
    match old {
        Some(old) => f.set_permissions(old.permissions()),
        None => Ok(()),
    }
}

/// `access(path, W_OK)`.
#[cfg(unix)]
fn writable(path: &Path) -> io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a NUL byte in the path"))?;
    // SAFETY: `c` is a NUL-terminated string that outlives the call; access(2) only
    // reads it.
    match unsafe { libc::access(c.as_ptr(), libc::W_OK) } {
        0 => Ok(()),
        _ => Err(io::Error::last_os_error()),
    }
}

#[cfg(not(unix))]
fn writable(path: &Path) -> io::Result<()> {
    std::fs::OpenOptions::new().write(true).open(path).map(drop)
}

/// A new, exclusively created temporary file in `path`'s folder.
fn temp_beside(path: &Path) -> io::Result<(PathBuf, std::fs::File)> {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    loop {
        let n = N.fetch_add(1, Ordering::Relaxed);
        let tmp = dir.join(format!(".{name}.{}.{n}.tmp", std::process::id()));
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)
        {
            Ok(f) => return Ok((tmp, f)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use std::os::unix::fs::{FileTypeExt, PermissionsExt};

    fn names(d: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn replaces_whole_files_and_leaves_no_temporary_behind() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("out.dot");
        std::fs::write(&p, "old contents").unwrap();
        write_atomic(&p, b"new").unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "new");
        assert_eq!(names(d.path()), ["out.dot"]);
        // A folder that does not exist: an error, nothing created, and the check says so
        // up front too.
        let q = d.path().join("missing/out.dot");
        assert!(write_atomic(&q, b"x").is_err());
        assert!(check_writable(&q).is_err());
        assert!(check_writable(&p).is_ok());
        assert!(!d.path().join("missing").exists());
        // A folder is refused, saying so, and leaves no temporary.
        let sub = d.path().join("sub");
        std::fs::create_dir(&sub).unwrap();
        std::fs::write(sub.join("f"), "keep").unwrap();
        let e = write_atomic(&sub, b"x").unwrap_err();
        assert!(e.to_string().contains("it is a folder"), "{e}");
        assert!(check_writable(&sub).is_err());
        assert_eq!(names(d.path()), ["out.dot", "sub"]);
    }

    #[test]
    fn a_replaced_file_keeps_its_mode() {
        let d = tempfile::tempdir().unwrap();
        for mode in [0o600, 0o640, 0o755] {
            let p = d.path().join(format!("f{mode:o}"));
            std::fs::write(&p, "old").unwrap();
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
            write_atomic(&p, b"new").unwrap();
            let m = std::fs::metadata(&p).unwrap();
            assert_eq!(m.permissions().mode() & 0o7777, mode);
            assert_eq!(std::fs::read(&p).unwrap(), b"new");
        }
    }

    /// A character device that discards what is written: a node of /dev/null's own
    /// device in a temporary folder where this process may make one (as root), else
    /// /dev/null itself (which an unprivileged process cannot replace, so a regression
    /// here never damages the machine's /dev/null).
    fn null_device(d: &Path) -> PathBuf {
        use std::os::unix::fs::MetadataExt;
        let p = d.join("null");
        let dev = std::fs::metadata("/dev/null").unwrap().rdev();
        let c = std::ffi::CString::new(p.to_str().unwrap()).unwrap();
        // SAFETY: `c` is NUL-terminated and outlives the call.
        let made = unsafe { libc::mknod(c.as_ptr(), libc::S_IFCHR | 0o666, dev) };
        if made == 0 {
            p
        } else {
            PathBuf::from("/dev/null")
        }
    }

    #[test]
    fn a_character_device_is_written_through_and_stays_one() {
        let d = tempfile::tempdir().unwrap();
        let null = null_device(d.path());
        check_writable(&null).unwrap();
        write_atomic(&null, b"discarded").unwrap();
        let m = std::fs::symlink_metadata(&null).unwrap();
        assert!(
            m.file_type().is_char_device(),
            "{} replaced",
            null.display()
        );
        assert_eq!(
            names(d.path()).len(),
            usize::from(null.starts_with(d.path()))
        );
    }

    #[test]
    fn a_fifo_gets_the_bytes_and_stays_a_fifo() {
        let d = tempfile::tempdir().unwrap();
        let fifo = d.path().join("fifo");
        let keep = d.path().join("fifo.keep");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: `c` is NUL-terminated and outlives the call.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        // A second name for the FIFO, so the reader is not left waiting on a FIFO the
        // writer no longer reaches (if the name were replaced, the test fails, not hangs).
        std::fs::hard_link(&fifo, &keep).unwrap();
        let reader = {
            let keep = keep.clone();
            std::thread::spawn(move || std::fs::read(keep).unwrap())
        };
        let bytes: Vec<u8> = (0..200_000u32).map(|i| i as u8).collect();
        check_writable(&fifo).unwrap();
        let wrote = write_atomic(&fifo, &bytes);
        // Unblocks a reader still waiting for a writer (a no-op when it has read).
        {
            use std::os::unix::fs::OpenOptionsExt;
            let _ = std::fs::OpenOptions::new()
                .write(true)
                .custom_flags(libc::O_NONBLOCK)
                .open(&keep);
        }
        let got = reader.join().unwrap();
        wrote.unwrap();
        assert!(std::fs::symlink_metadata(&fifo)
            .unwrap()
            .file_type()
            .is_fifo());
        assert_eq!(got.len(), bytes.len());
        assert!(got == bytes);
    }

    #[test]
    fn a_symlink_is_followed_and_stays_a_link() {
        let d = tempfile::tempdir().unwrap();
        let real = d.path().join("real.txt");
        std::fs::write(&real, "old").unwrap();
        std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o600)).unwrap();
        let link = d.path().join("link.txt");
        std::os::unix::fs::symlink("real.txt", &link).unwrap();
        // A link to a link, across a folder.
        std::fs::create_dir(d.path().join("sub")).unwrap();
        let link2 = d.path().join("sub/link2.txt");
        std::os::unix::fs::symlink("../link.txt", &link2).unwrap();
        check_writable(&link2).unwrap();
        write_atomic(&link2, b"new").unwrap();
        for l in [&link, &link2] {
            assert!(std::fs::symlink_metadata(l)
                .unwrap()
                .file_type()
                .is_symlink());
        }
        assert_eq!(std::fs::read(&real).unwrap(), b"new");
        let mode = std::fs::metadata(&real).unwrap().permissions().mode();
        assert_eq!(mode & 0o7777, 0o600);
        // A dangling link creates its target; a loop of links is an error.
        let dangling = d.path().join("dangling");
        std::os::unix::fs::symlink("made.txt", &dangling).unwrap();
        write_atomic(&dangling, b"made").unwrap();
        assert_eq!(std::fs::read(d.path().join("made.txt")).unwrap(), b"made");
        assert!(std::fs::symlink_metadata(&dangling)
            .unwrap()
            .file_type()
            .is_symlink());
        let (a, b) = (d.path().join("a"), d.path().join("b"));
        std::os::unix::fs::symlink("b", &a).unwrap();
        std::os::unix::fs::symlink("a", &b).unwrap();
        let e = write_atomic(&a, b"x").unwrap_err();
        assert!(e.to_string().contains("symbolic links"), "{e}");
        // A link to a folder names where it leads.
        let to_dir = d.path().join("to_dir");
        std::os::unix::fs::symlink("sub", &to_dir).unwrap();
        let e = write_atomic(&to_dir, b"x").unwrap_err().to_string();
        assert!(
            e.contains("a folder") && e.contains("where the link leads"),
            "{e}"
        );
    }

    #[test]
    fn a_socket_is_refused() {
        let d = tempfile::tempdir().unwrap();
        let s = d.path().join("sock");
        let _l = std::os::unix::net::UnixListener::bind(&s).unwrap();
        let e = write_atomic(&s, b"x").unwrap_err();
        assert!(e.to_string().contains("a socket"), "{e}");
        assert!(check_writable(&s).is_err());
        assert!(std::fs::symlink_metadata(&s)
            .unwrap()
            .file_type()
            .is_socket());
    }
}
