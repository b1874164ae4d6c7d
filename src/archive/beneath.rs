//! Confined file-system access for restore, rollback and clean.
//!
//! Every create, mkdir, symlink, rename, chmod, timestamp and unlink goes through a directory
//! handle ([`cap_std::fs::Dir`]: `openat2` with `RESOLVE_BENEATH` on Linux) and names a single
//! component of a directory that was itself opened one component at a time without following
//! symlinks. A link — put there by an archive, by another `path` root, or left by an earlier
//! job — is never traversed: it can be replaced or removed, never written through. Only a
//! root's own location, which the user wrote, is opened by path ([`open_trusted`]).

use cap_fs_ext::{DirExt, FollowSymlinks, OpenOptionsFollowExt};
use cap_std::fs::{Dir, File, OpenOptions};
use std::collections::HashMap;
use std::ffi::OsStr;
use std::io;
use std::path::Path;
use std::sync::Arc;

/// Open a directory the user named (a root, or the nearest existing directory above one).
/// Symlinks on this path are followed: the user wrote it.
pub(crate) fn open_trusted(path: &Path) -> io::Result<Dir> {
    Dir::open_ambient_dir(path, cap_std::ambient_authority())
}

/// Open the directory at the real path `real` (absolute, symlinks already resolved) from the
/// root of the file system, one component at a time, never following a link: where any
/// component is a link now — swapped in since `real` was resolved — this fails rather than
/// lands elsewhere. What is opened is what is judged and removed through.
#[cfg(unix)]
pub(crate) fn open_real(real: &Path) -> io::Result<Dir> {
    use std::path::Component;
    let not_real = || io::Error::new(io::ErrorKind::InvalidInput, format!("`{}` is not a real path", real.display()));
    let mut components = real.components();
    if components.next() != Some(Component::RootDir) {
        return Err(not_real());
    }
    let mut dir = open_trusted(Path::new("/"))?;
    for component in components {
        let Component::Normal(name) = component else { return Err(not_real()) };
        dir = dir.open_dir_nofollow(name)?;
    }
    Ok(dir)
}

#[cfg(not(unix))]
pub(crate) fn open_real(real: &Path) -> io::Result<Dir> {
    open_trusted(real)
}

/// Where an open directory is now, as the kernel names it (`/proc/self/fd` on Linux,
/// `F_GETPATH` on macOS); `None` where the platform cannot tell.
pub(crate) fn location(dir: &Dir) -> Option<std::path::PathBuf> {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        std::fs::read_link(format!("/proc/self/fd/{}", dir.as_raw_fd())).ok()
    }
    #[cfg(target_os = "macos")]
    {
        use std::os::fd::AsRawFd;
        use std::os::unix::ffi::OsStrExt;
        let mut buf = vec![0u8; libc::PATH_MAX as usize];
        // SAFETY: F_GETPATH writes a NUL-terminated path of at most PATH_MAX bytes into `buf`.
        let rc = unsafe { libc::fcntl(dir.as_raw_fd(), libc::F_GETPATH, buf.as_mut_ptr()) };
        if rc == -1 {
            return None;
        }
        let len = buf.iter().position(|&b| b == 0)?;
        Some(std::path::PathBuf::from(OsStr::from_bytes(&buf[..len])))
    }
    #[cfg(not(any(target_os = "linux", target_os = "macos")))]
    {
        let _ = dir;
        None
    }
}

/// Open the subdirectory `name` of `dir`; a symlink there is an error, never followed.
pub(crate) fn open_child(dir: &Dir, name: &str) -> io::Result<Dir> {
    check_component(name)?;
    dir.open_dir_nofollow(name)
}

/// Create the new file `name` in `dir` for writing, with `mode` (before the umask). Fails if
/// anything, a symlink included, is already there.
pub(crate) fn create_file(dir: &Dir, name: &str, mode: u32) -> io::Result<std::fs::File> {
    create(dir, name, mode, false)
}

/// [`create_file`], open for reading too (a file written out of order is read back).
pub(crate) fn create_file_rw(dir: &Dir, name: &str, mode: u32) -> io::Result<std::fs::File> {
    create(dir, name, mode, true)
}

fn create(dir: &Dir, name: &str, mode: u32, read: bool) -> io::Result<std::fs::File> {
    check_component(name)?;
    let mut options = OpenOptions::new();
    options.read(read).write(true).create_new(true).follow(FollowSymlinks::No);
    #[cfg(unix)]
    {
        use cap_std::fs::OpenOptionsExt;
        options.mode(mode);
    }
    #[cfg(not(unix))]
    let _ = mode;
    dir.open_with(name, &options).map(File::into_std)
}

/// The plain file at `name` in `dir`, opened for reading without following a link there and
/// without blocking (a FIFO is not read), with its permission bits; `None`: nothing, a link,
/// or anything that is not a plain file.
pub(crate) fn open_plain_file(dir: &Dir, name: &str) -> io::Result<Option<(std::fs::File, u32)>> {
    check_component(name)?;
    let mut options = OpenOptions::new();
    options.read(true).follow(FollowSymlinks::No);
    #[cfg(unix)]
    {
        use cap_std::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY);
    }
    let file = match dir.open_with(name, &options) {
        Ok(file) => file,
        Err(e) if matches!(e.kind(), io::ErrorKind::NotFound | io::ErrorKind::NotADirectory) => return Ok(None),
        #[cfg(unix)]
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => return Ok(None),
        Err(e) => {
            // A directory or a link (where the platform reports it otherwise) is no file in place.
            return match kind_of(dir, name) {
                Ok(Some(Kind::Dir | Kind::Symlink)) => Ok(None),
                _ => Err(e),
            };
        }
    };
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Ok(None);
    }
    #[cfg(unix)]
    let mode = {
        use cap_std::fs::PermissionsExt;
        meta.permissions().mode() & 0o7777
    };
    #[cfg(not(unix))]
    let mode = if meta.permissions().readonly() { 0o444 } else { 0o644 };
    Ok(Some((file.into_std(), mode)))
}

/// What is at `name` in `dir`, without following a symlink there; `None`: nothing.
pub(crate) fn kind_of(dir: &Dir, name: &str) -> io::Result<Option<Kind>> {
    check_component(name)?;
    let meta = match dir.symlink_metadata(name) {
        Ok(meta) => meta,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    Ok(Some(if meta.is_dir() {
        Kind::Dir
    } else if meta.file_type().is_symlink() {
        Kind::Symlink
    } else {
        Kind::Other
    }))
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Dir,
    Symlink,
    /// A file, or anything else that is not a directory.
    Other,
}

/// Names are single components: the text checks upstream guarantee it, this makes it certain.
fn check_component(name: &str) -> io::Result<()> {
    if name.is_empty() || name == "." || name == ".." || name.contains(['/', '\0']) {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("`{name}` is not a single path component")));
    }
    Ok(())
}

pub(crate) fn dir_mode(dir: &Dir) -> io::Result<u32> {
    #[cfg(unix)]
    {
        use cap_std::fs::PermissionsExt;
        Ok(dir.dir_metadata()?.permissions().mode() & 0o7777)
    }
    #[cfg(not(unix))]
    {
        let _ = dir;
        Ok(0o755)
    }
}

/// Which directory an open handle is (device and inode): two handles may reach one directory.
pub(crate) fn identity(dir: &Dir) -> io::Result<(u64, u64)> {
    #[cfg(unix)]
    {
        use cap_std::fs::MetadataExt;
        let meta = dir.dir_metadata()?;
        Ok((meta.dev(), meta.ino()))
    }
    #[cfg(not(unix))]
    {
        let _ = dir;
        Ok((0, 0))
    }
}

/// Set the permission bits of an open directory, through its handle (`fchmodat(fd, ".")`: the
/// handle may be an `O_PATH` descriptor, which `fchmod` refuses).
pub(crate) fn set_dir_mode(dir: &Dir, mode: u32) -> io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::fd::AsRawFd;
        // SAFETY: the descriptor is open for the duration of the call and the path is a valid
        // NUL-terminated string; fchmodat touches nothing else.
        let rc = unsafe { libc::fchmodat(dir.as_raw_fd(), c".".as_ptr(), mode as libc::mode_t, 0) };
        if rc == 0 { Ok(()) } else { Err(io::Error::last_os_error()) }
    }
    #[cfg(not(unix))]
    {
        let _ = (dir, mode);
        Ok(())
    }
}

/// Give the owner write and search permission on an open directory; the old mode when it had
/// to change.
pub(crate) fn make_writable(dir: &Dir) -> io::Result<Option<u32>> {
    let mode = dir_mode(dir)?;
    if cfg!(not(unix)) || mode & 0o300 == 0o300 {
        return Ok(None);
    }
    set_dir_mode(dir, mode | 0o300)?;
    Ok(Some(mode))
}

/// Remove `name` from `parent` and, for a directory, everything in it, without following any
/// link (a link is removed as a link). Read-only directories are opened for the removal.
pub(crate) fn remove_tree(parent: &Dir, name: &str) -> io::Result<()> {
    check_component(name)?;
    remove_entry(parent, OsStr::new(name))
}

/// [`remove_tree`] for a name that is one component: checked, or read from the directory (it
/// may not be UTF-8).
fn remove_entry(parent: &Dir, name: &OsStr) -> io::Result<()> {
    let meta = match parent.symlink_metadata(name) {
        Ok(meta) => meta,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    if !meta.is_dir() {
        return remove_file_or_link(parent, name);
    }
    {
        // Closed before its removal: Windows refuses to remove a directory open without
        // `FILE_SHARE_DELETE`, as cap-std opens them.
        let dir = parent.open_dir_nofollow(name)?;
        let _ = make_writable(&dir);
        for entry in dir.entries()? {
            remove_entry(&dir, &entry?.file_name())?;
        }
    }
    parent.remove_dir(name)
}

/// Remove the file or link `name` from `dir`. Windows refuses to delete a read-only file: there
/// its read-only attribute is cleared first (unix needs only a writable directory).
pub(crate) fn remove_file_or_link(dir: &Dir, name: impl AsRef<Path>) -> io::Result<()> {
    let name = name.as_ref();
    let removed = dir.remove_file_or_symlink(name);
    #[cfg(windows)]
    if removed.as_ref().is_err_and(|e| e.kind() == io::ErrorKind::PermissionDenied) {
        let meta = dir.symlink_metadata(name)?;
        if meta.is_file() && meta.permissions().readonly() {
            let mut permissions = meta.permissions();
            #[allow(clippy::permissions_set_readonly_false)] // Windows: the attribute, not modes
            permissions.set_readonly(false);
            dir.set_permissions(name, permissions)?;
            return dir.remove_file_or_symlink(name);
        }
    }
    removed
}

/// What [`Tree::dir_with`] does where a directory is missing: it gets the parent, the missing
/// directory's path relative to the tree's base (its name is the last component) and what is
/// there (`None`: nothing), and must leave a directory there or fail.
pub(crate) type MakeRoom<'a> = dyn FnMut(&Arc<Dir>, &str, Option<Kind>) -> io::Result<()> + 'a;

/// Directory handles beneath one base, opened one component at a time without following links
/// and kept for reuse. Keys are `/`-separated paths relative to the base (`""` is the base).
pub(crate) struct Tree {
    dirs: HashMap<String, Arc<Dir>>,
}

impl Tree {
    pub fn new(base: Arc<Dir>) -> Self {
        let mut dirs = HashMap::new();
        dirs.insert(String::new(), base);
        Self { dirs }
    }

    pub fn base(&self) -> &Arc<Dir> {
        &self.dirs[""]
    }

    /// The directory `rel`, opened without following any link on the way; `missing` decides
    /// what happens where a component is not a directory (absent, a link or a file).
    pub fn dir_with(&mut self, rel: &str, missing: &mut MakeRoom<'_>) -> io::Result<Arc<Dir>> {
        if let Some(dir) = self.dirs.get(rel) {
            return Ok(Arc::clone(dir));
        }
        let (parent_rel, name) = split_last(rel);
        let parent = self.dir_with(parent_rel, missing)?;
        let dir = match open_child(&parent, name) {
            Ok(dir) => dir,
            Err(e) => {
                let Ok(found) = kind_of(&parent, name) else { return Err(e) };
                if found == Some(Kind::Dir) {
                    return Err(e);
                }
                missing(&parent, rel, found)?;
                open_child(&parent, name)?
            }
        };
        let dir = Arc::new(dir);
        self.dirs.insert(rel.to_owned(), Arc::clone(&dir));
        Ok(dir)
    }

    /// The directory `rel`; anything that is not a directory on the way is an error.
    pub fn dir(&mut self, rel: &str) -> io::Result<Arc<Dir>> {
        self.dir_with(rel, &mut |_, rel, found| {
            let name = split_last(rel).1;
            Err(match found {
                None => io::Error::new(io::ErrorKind::NotFound, format!("`{name}` does not exist")),
                Some(_) => io::Error::new(io::ErrorKind::NotADirectory, format!("`{name}` is not a directory")),
            })
        })
    }

    /// Forget the handles of `rel` and below (it was moved away).
    pub fn forget(&mut self, rel: &str) {
        if rel.is_empty() {
            return;
        }
        let prefix = format!("{rel}/");
        self.dirs.retain(|k, _| k != rel && !k.starts_with(&prefix));
    }
}

/// `a/b/c` → (`a/b`, `c`); `c` → (``, `c`).
pub(crate) fn split_last(rel: &str) -> (&str, &str) {
    rel.rsplit_once('/').unwrap_or(("", rel))
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::fs;

    #[test]
    fn links_on_the_way_are_never_followed() {
        let scratch = tempfile::tempdir().unwrap();
        let outside = scratch.path().join("outside");
        let root = scratch.path().join("root");
        fs::create_dir_all(&outside).unwrap();
        fs::create_dir_all(root.join("real")).unwrap();
        std::os::unix::fs::symlink("../outside", root.join("link")).unwrap();
        let mut tree = Tree::new(Arc::new(open_trusted(&root).unwrap()));
        assert!(tree.dir("real").is_ok());
        assert!(tree.dir("link").is_err());
        assert!(tree.dir("link/x").is_err());
        let base = Arc::clone(tree.base());
        assert!(create_file(&base, "link", 0o644).is_err(), "create_new never writes through a link");
        assert!(create_file(&base, "../escape", 0o644).is_err());
        assert_eq!(kind_of(&base, "link").unwrap(), Some(Kind::Symlink));
        remove_tree(&base, "link").unwrap();
        assert!(outside.is_dir(), "removing a link leaves its target");
        assert_eq!(fs::read_dir(&outside).unwrap().count(), 0);
    }

    #[test]
    fn remove_tree_opens_read_only_directories_and_keeps_link_targets() {
        use std::os::unix::fs::PermissionsExt;
        let scratch = tempfile::tempdir().unwrap();
        let keep = scratch.path().join("keep");
        fs::create_dir_all(&keep).unwrap();
        fs::write(keep.join("precious"), b"x").unwrap();
        let tree = scratch.path().join("tree");
        fs::create_dir_all(tree.join("ro/sub")).unwrap();
        fs::write(tree.join("ro/sub/f"), b"x").unwrap();
        std::os::unix::fs::symlink(&keep, tree.join("ro/to-keep")).unwrap();
        fs::set_permissions(tree.join("ro/sub"), fs::Permissions::from_mode(0o555)).unwrap();
        fs::set_permissions(tree.join("ro"), fs::Permissions::from_mode(0o555)).unwrap();
        let parent = open_trusted(scratch.path()).unwrap();
        remove_tree(&parent, "tree").unwrap();
        assert!(!tree.exists());
        assert!(keep.join("precious").exists());
    }
}
