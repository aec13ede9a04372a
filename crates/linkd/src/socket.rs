//! The control socket's file: created private, published atomically,
//! removed at exit.
//!
//! The socket is bound and listening under a hidden name in the same
//! directory first, then renamed into place with `RENAME_NOREPLACE`. So
//! whoever sees `PATH` can connect to it at once, and an existing `PATH`
//! (another daemon's socket, a stale file) is never replaced.

use std::fs;
use std::io;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};

use nix::fcntl::{renameat2, RenameFlags, AT_FDCWD};
use nix::sys::stat::{umask, Mode};

/// The socket file; removed on drop if it is still the one created.
#[derive(Debug)]
pub struct SocketFile {
    /// The final path, from `--control`.
    path: PathBuf,
    /// The hidden name it is bound under until published.
    hidden: PathBuf,
    published: bool,
    /// Device and inode of the file, to recognise it at removal.
    identity: (u64, u64),
}

/// Bind and listen under a hidden name next to `path`, mode 0600.
pub fn bind(path: &Path) -> Result<(UnixListener, SocketFile), String> {
    let shown = path.display();
    match path.symlink_metadata() {
        Ok(_) => {
            return Err(format!(
                "--control: {shown} already exists; refusing to start \
                 (another daemon's socket, or a stale file to remove)"
            ))
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(format!("--control: cannot check {shown}: {e}")),
    }
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let hidden = dir.join(format!(".linkd.{}", std::process::id()));
    // A leftover from an earlier process with the same PID.
    if let Ok(meta) = hidden.symlink_metadata() {
        if meta.file_type().is_socket() {
            let _ = fs::remove_file(&hidden);
        }
    }
    // The umask makes the file 0600 from the moment it exists.
    let old = umask(Mode::from_bits_truncate(0o177));
    let bound = UnixListener::bind(&hidden);
    umask(old);
    let listener = bound.map_err(|e| {
        format!(
            "--control: cannot create a socket in {}: {e}",
            dir.display()
        )
    })?;
    let mut file = SocketFile {
        path: path.to_owned(),
        hidden: hidden.clone(),
        published: false,
        identity: (0, 0),
    };
    fs::set_permissions(&hidden, fs::Permissions::from_mode(0o600))
        .map_err(|e| format!("--control: cannot chmod {}: {e}", hidden.display()))?;
    let meta = hidden
        .symlink_metadata()
        .map_err(|e| format!("--control: cannot stat {}: {e}", hidden.display()))?;
    file.identity = (meta.dev(), meta.ino());
    Ok((listener, file))
}

impl SocketFile {
    /// Move the socket to its final path, which must still not exist.
    pub fn publish(&mut self) -> Result<(), String> {
        renameat2(
            AT_FDCWD,
            &self.hidden,
            AT_FDCWD,
            &self.path,
            RenameFlags::RENAME_NOREPLACE,
        )
        .map_err(|e| format!("--control: cannot create {}: {e}", self.path.display()))?;
        self.published = true;
        Ok(())
    }

    fn current(&self) -> &Path {
        if self.published {
            &self.path
        } else {
            &self.hidden
        }
    }
}

impl Drop for SocketFile {
    fn drop(&mut self) {
        let path = self.current();
        // Only remove the file this daemon created, not one that replaced it.
        if let Ok(meta) = path.symlink_metadata() {
            if (meta.dev(), meta.ino()) == self.identity {
                let _ = fs::remove_file(path);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixStream;

    fn tempdir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("linkd-sock-{tag}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir(&d).unwrap();
        d
    }

    #[test]
    fn publish_then_remove() {
        let d = tempdir("pub");
        let path = d.join("ctl.sock");
        let (listener, mut file) = bind(&path).unwrap();
        assert!(!path.exists());
        file.publish().unwrap();
        let meta = path.symlink_metadata().unwrap();
        assert!(meta.file_type().is_socket());
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        // Listening already: a connection succeeds as soon as the file is there.
        let _c = UnixStream::connect(&path).unwrap();
        drop(listener);
        drop(file);
        assert!(!path.exists());
        assert_eq!(fs::read_dir(&d).unwrap().count(), 0);
        fs::remove_dir(&d).unwrap();
    }

    #[test]
    fn refuses_an_existing_path() {
        let d = tempdir("exists");
        let path = d.join("ctl.sock");
        fs::write(&path, b"").unwrap();
        let e = bind(&path).unwrap_err();
        assert!(e.contains("already exists"), "{e}");
        // Appearing between bind and publish: still not replaced.
        fs::remove_file(&path).unwrap();
        let (_l, mut file) = bind(&path).unwrap();
        fs::write(&path, b"x").unwrap();
        assert!(file.publish().is_err());
        drop(file);
        assert_eq!(fs::read(&path).unwrap(), b"x");
        fs::remove_dir_all(&d).unwrap();
    }
}
