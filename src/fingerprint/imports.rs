//! The `imports` component, and the module files it adds to `files`: every Python file that
//! `hash-files` selects is followed through its imports ([`super::pyscan`]: parsed, never run),
//! transitively, and each module file inside the workspace that it reaches enters the key.
//!
//! A module is looked for as the interpreter would (docs/usage.md gives the order of places).
//! Without `python`, a standard-library name is looked for only before the interpreter's own
//! places (where a script's directory can shadow it), never in the workspace. In each directory
//! a package (`name/__init__.py`) comes before an extension module, then a module (`name.py`);
//! a directory without `__init__.py` is a namespace package. The first place that has the module
//! wins; when it is outside the workspace or the interpreter's own (prefixes, standard library,
//! `site-packages`, also a virtual environment inside the workspace), it is not followed:
//! `python.dists` covers it. A computed name with a known package ([`pyscan::Import::whole`])
//! and a `*` import of a computed `__all__` load all of the package's modules.
//!
//! Bounded and linear: only regular files inside the workspace are read (a link out of it, or to
//! a special file, is not), each up to [`SCAN_LIMIT`]; each directory is listed once and each
//! module resolved once per search path; search paths are deduplicated and shared between
//! scripts whose own directories hold no name anything imports (so `**/*.py` costs about what
//! its files do, not scripts × imports).

use super::pyscan::{self, All, End, Import, Scan, Unfollowed};
use std::cell::Cell;
use std::collections::{HashMap, HashSet, VecDeque};
use std::path::{Component, Path, PathBuf};
use std::rc::Rc;

/// Files larger than this are hashed but not scanned.
pub const SCAN_LIMIT: u64 = 4 << 20;
/// Times the traversal starts over when a name it learned late is in a directory it left out of
/// a search path; after that, nothing is left out.
const RESTARTS: usize = 4;
/// Distinct search paths; a `sys.path` change past them is not followed (and said).
const SEARCH_PATHS: usize = 1024;

/// Where the `python` interpreter looks for modules, as it reported it: its `sys.path`, and the
/// places its installation owns (prefixes, standard library, site-packages).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SearchPath {
    pub entries: Vec<PathBuf>,
    pub installed: Vec<PathBuf>,
}

/// How an importer reaches a module.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Via {
    Import,
    /// A computed name in the module's package: the package's every module.
    ComputedName,
    /// `from package import *` of a package whose `__all__` is computed.
    Star,
}

/// Why a Python file's imports are not all followed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Trouble {
    /// Lines whose imports or `sys.path` changes are not followed.
    Lines(Vec<(u32, Unfollowed)>),
    /// Larger than [`SCAN_LIMIT`] (its size): hashed, not scanned.
    TooLarge(u64),
    /// A module that resolves out of the workspace or to a file that is not regular (what it
    /// resolves to): not read, not in the key.
    NotRead(PathBuf),
}

/// What [`follow`] found: the modules reached, and the files whose imports are not all followed.
#[derive(Debug, Default)]
pub struct Followed {
    /// The files met, absolute: the indexes `reached` uses.
    pub paths: Vec<PathBuf>,
    /// Each module file reached → the files that import it, and how.
    pub reached: Vec<(usize, Vec<(usize, Via)>)>,
    pub troubles: Vec<(PathBuf, Trouble)>,
}

#[cfg(test)]
impl Followed {
    /// Module files (absolute) → the files (absolute) that import them, and how.
    pub fn by_path(&self) -> std::collections::BTreeMap<&Path, std::collections::BTreeMap<&Path, Via>> {
        let path = |i: &usize| self.paths[*i].as_path();
        self.reached.iter().map(|(m, by)| (path(m), by.iter().map(|(f, via)| (path(f), *via)).collect())).collect()
    }
}

/// Whether `path` is a Python file: `*.py`, `*.pyw`, or a script whose first line names python.
pub fn is_python(path: &Path) -> bool {
    if path.extension().is_some_and(|e| e == "py" || e == "pyw") {
        return true;
    }
    let mut head = [0u8; 128];
    let n = open_regular(path).and_then(|mut f| std::io::Read::read(&mut f, &mut head)).unwrap_or(0);
    let first = head[..n].split(|b| *b == b'\n').next().unwrap_or_default();
    first.starts_with(b"#!") && first.windows(6).any(|w| w == b"python")
}

/// Open `path` for reading when it is a regular file, never waiting on a FIFO or a device.
fn open_regular(path: &Path) -> std::io::Result<std::fs::File> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(&mut options, libc::O_NONBLOCK);
    let file = options.open(path)?;
    if !file.metadata()?.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    Ok(file)
}

/// Every module file inside `workspace` that `roots` (Python files) reach through their
/// imports, with the files that import it; and the files whose imports are not all followed.
pub fn follow(roots: &[PathBuf], workspace: &Path, search: &SearchPath) -> Followed {
    let mut follower = Follower::new(workspace, search);
    let roots: Vec<FileId> = roots.iter().map(|r| follower.file(r)).collect();
    // What the scripts import decides which directories matter in a search path.
    for &root in &roots {
        follower.scan(root);
    }
    for attempt in 0..=RESTARTS {
        follower.prune = attempt < RESTARTS;
        if let Some(edges) = follower.run(&roots) {
            return follower.finish(&roots, edges);
        }
    }
    unreachable!("a traversal that leaves nothing out never starts over")
}

type FileId = u32;
type DirId = u32;
type CtxId = u32;

/// A directory's entries that can be modules — `name.py` files, directories, extension modules —
/// each with the ids of its file and directory once asked for.
#[derive(Debug, Default)]
struct Listing {
    entries: HashMap<Box<str>, Entry>,
}

#[derive(Debug, Default)]
struct Entry {
    module: bool,
    dir: bool,
    extension: bool,
    /// `name.py`'s id.
    file: Cell<Option<FileId>>,
    /// The directory `name`'s id.
    sub: Cell<Option<DirId>>,
}

impl Listing {
    fn read(dir: &Path) -> Self {
        let mut listing = Listing::default();
        let Ok(entries) = std::fs::read_dir(dir) else { return listing };
        for entry in entries.flatten() {
            let Ok(name) = entry.file_name().into_string() else { continue };
            let Ok(mut kind) = entry.file_type() else { continue };
            if kind.is_symlink() {
                match std::fs::metadata(entry.path()) {
                    Ok(meta) => kind = meta.file_type(),
                    Err(_) => continue,
                }
            }
            if kind.is_dir() {
                listing.entries.entry(name.into()).or_default().dir = true;
            } else if let Some(stem) = name.strip_suffix(".py").filter(|_| kind.is_file()) {
                listing.entries.entry(stem.into()).or_default().module = true;
            } else if kind.is_file() && (name.ends_with(".so") || name.ends_with(".pyd")) {
                let stem = name.split('.').next().unwrap_or_default();
                listing.entries.entry(stem.into()).or_default().extension = true;
            }
        }
        listing
    }

    fn names(&self) -> impl Iterator<Item = &str> {
        self.entries.keys().map(|n| &**n)
    }
}

struct FileData {
    path: PathBuf,
    dir: DirId,
    /// `None`: not read yet; `Some(None)`: not readable (see `trouble`).
    scan: Option<Option<Rc<Scanned>>>,
    followable: Option<bool>,
    trouble: Option<Trouble>,
}

/// What a file's scan leaves for the traversal: its imports as shapes (each import's id, the
/// same for every file that makes it, so that it is resolved once per search path, or once per
/// directory when relative), its `sys.path` changes and its `__all__`.
struct Scanned {
    imports: Vec<u32>,
    path: Vec<(End, PathBuf)>,
    all: Option<All>,
}

/// A search path: `early` (inserted entries, the script's directory), `late` (the interpreter's
/// entries, appended ones), then the workspace; deduplicated, and without the directories that
/// hold no name anything imports.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Ctx {
    early: Vec<DirId>,
    late: Vec<DirId>,
    tail: Vec<DirId>,
}

enum Found {
    Module(FileId),
    Package {
        dir: DirId,
        init: FileId,
    },
    Namespace(Vec<DirId>),
    /// An extension module, which the interpreter loads before a `.py` of the same name.
    Extension,
}

type Hits = Rc<[(FileId, Via)]>;

struct Follower<'a> {
    workspace: &'a Path,
    /// The workspace with links resolved: what a file read must lie in.
    real_workspace: PathBuf,
    search: &'a SearchPath,
    installed: Vec<PathBuf>,
    files: Vec<FileData>,
    file_ids: HashMap<PathBuf, FileId>,
    dirs: Vec<(PathBuf, Option<Rc<Listing>>)>,
    dir_ids: HashMap<PathBuf, DirId>,
    /// Directories with links resolved (`None`: gone).
    real_dirs: HashMap<DirId, Option<PathBuf>>,
    /// Imports without their lines: their ids, and each by id.
    shape_ids: HashMap<Rc<Import>, u32>,
    shapes: Vec<Rc<Import>>,
    /// The first name of every absolute import of every file read.
    imported: HashSet<String>,
    entries: Vec<DirId>,
    workspace_dir: DirId,
    /// Leave out of search paths the directories that provide no imported name.
    prune: bool,
    /// Modules that resolve out of the workspace or to a special file (see `followable`).
    unread: HashSet<FileId>,
    // One traversal's state (see `run`).
    ctxs: Vec<Rc<Ctx>>,
    ctx_ids: HashMap<Rc<Ctx>, CtxId>,
    ctx_after: HashMap<(CtxId, FileId), CtxId>,
    relevant: HashMap<DirId, bool>,
    pruned_names: HashSet<Box<str>>,
    absolute: HashMap<(CtxId, u32), Hits>,
    relative: HashMap<(DirId, u32), Hits>,
    over: HashSet<FileId>,
    /// A name learned late is in a directory this traversal left out.
    restart: bool,
}

impl<'a> Follower<'a> {
    fn new(workspace: &'a Path, search: &'a SearchPath) -> Self {
        let installed =
            search.installed.iter().filter(|p| !workspace.starts_with(p)).map(|p| crate::paths::normalize(p)).collect();
        let real_workspace = std::fs::canonicalize(workspace).unwrap_or_else(|_| workspace.to_owned());
        let mut follower = Follower {
            workspace,
            real_workspace,
            search,
            installed,
            files: Vec::new(),
            file_ids: HashMap::new(),
            dirs: Vec::new(),
            dir_ids: HashMap::new(),
            real_dirs: HashMap::new(),
            shape_ids: HashMap::new(),
            shapes: Vec::new(),
            imported: HashSet::new(),
            entries: Vec::new(),
            workspace_dir: 0,
            prune: true,
            ctxs: Vec::new(),
            ctx_ids: HashMap::new(),
            ctx_after: HashMap::new(),
            relevant: HashMap::new(),
            pruned_names: HashSet::new(),
            absolute: HashMap::new(),
            relative: HashMap::new(),
            unread: HashSet::new(),
            over: HashSet::new(),
            restart: false,
        };
        follower.entries = search.entries.iter().map(|e| follower.dir(&crate::paths::normalize(e))).collect();
        follower.workspace_dir = follower.dir(workspace);
        follower
    }

    fn dir(&mut self, path: &Path) -> DirId {
        if let Some(&id) = self.dir_ids.get(path) {
            return id;
        }
        let id = self.dirs.len() as DirId;
        self.dirs.push((path.to_owned(), None));
        self.dir_ids.insert(path.to_owned(), id);
        id
    }

    fn listing(&mut self, dir: DirId) -> Rc<Listing> {
        let (path, listing) = &mut self.dirs[dir as usize];
        listing.get_or_insert_with(|| Rc::new(Listing::read(path))).clone()
    }

    fn file(&mut self, path: &Path) -> FileId {
        if let Some(&id) = self.file_ids.get(path) {
            return id;
        }
        let dir = self.dir(path.parent().unwrap_or(path));
        let id = self.files.len() as FileId;
        self.files.push(FileData { path: path.to_owned(), dir, scan: None, followable: None, trouble: None });
        self.file_ids.insert(path.to_owned(), id);
        id
    }

    /// `dir/name`, a file.
    fn file_in(&mut self, dir: DirId, name: &str) -> FileId {
        let path = self.dirs[dir as usize].0.join(name);
        self.file(&path)
    }

    fn subdir(&mut self, dir: DirId, name: &str) -> DirId {
        let path = self.dirs[dir as usize].0.join(name);
        self.dir(&path)
    }

    /// The id of `dir/name.py`, the entry `name` of its listing.
    fn entry_file(&mut self, dir: DirId, name: &str, entry: &Entry) -> FileId {
        if let Some(id) = entry.file.get() {
            return id;
        }
        let id = self.file_in(dir, &format!("{name}.py"));
        entry.file.set(Some(id));
        id
    }

    /// The id of the directory `dir/name`, the entry `name` of its listing.
    fn entry_dir(&mut self, dir: DirId, name: &str, entry: &Entry) -> DirId {
        if let Some(id) = entry.sub.get() {
            return id;
        }
        let id = self.subdir(dir, name);
        entry.sub.set(Some(id));
        id
    }

    /// `dir/__init__.py`, when `dir` is a regular package.
    fn init(&mut self, dir: DirId) -> Option<FileId> {
        let listing = self.listing(dir);
        let entry = listing.entries.get("__init__").filter(|e| e.module)?;
        Some(self.entry_file(dir, "__init__", entry))
    }

    /// The file's bytes, when it is a regular file inside the workspace no larger than
    /// [`SCAN_LIMIT`].
    fn read(&mut self, file: FileId) -> Result<Vec<u8>, Trouble> {
        let path = self.files[file as usize].path.clone();
        let (real, meta) = self.real(file).ok_or(Trouble::NotRead(path))?;
        if !real.starts_with(&self.real_workspace) || !meta.is_file() {
            return Err(Trouble::NotRead(real));
        }
        if meta.len() > SCAN_LIMIT {
            return Err(Trouble::TooLarge(meta.len()));
        }
        let file = open_regular(&real).map_err(|_| Trouble::NotRead(real.clone()))?;
        let mut bytes = Vec::with_capacity(meta.len() as usize);
        std::io::Read::read_to_end(&mut std::io::Read::take(file, SCAN_LIMIT + 1), &mut bytes)
            .map_err(|_| Trouble::NotRead(real.clone()))?;
        if bytes.len() as u64 > SCAN_LIMIT {
            return Err(Trouble::TooLarge(bytes.len() as u64));
        }
        Ok(bytes)
    }

    /// Where `file` is once links are resolved, and what is there: its directory resolved once
    /// for all its files, the file itself only when it is a link.
    fn real(&mut self, file: FileId) -> Option<(PathBuf, std::fs::Metadata)> {
        let FileData { path, dir, .. } = &self.files[file as usize];
        let meta = std::fs::symlink_metadata(path).ok()?;
        if meta.is_symlink() {
            let real = std::fs::canonicalize(path).ok()?;
            let meta = std::fs::metadata(&real).ok()?;
            return Some((real, meta));
        }
        let (path, dir) = (path.clone(), *dir);
        let real_dir = match self.real_dirs.get(&dir) {
            Some(real) => real.clone(),
            None => {
                let real = std::fs::canonicalize(&self.dirs[dir as usize].0).ok();
                self.real_dirs.insert(dir, real.clone());
                real
            }
        };
        Some((real_dir?.join(path.file_name()?), meta))
    }

    /// The file's scan, read once.
    fn scan(&mut self, file: FileId) -> Option<Rc<Scanned>> {
        if let Some(scan) = &self.files[file as usize].scan {
            return scan.clone();
        }
        let path = self.files[file as usize].path.clone();
        let scanned = match self.read(file) {
            Ok(bytes) => {
                let Scan { imports, path, all, unfollowed } = pyscan::scan(&bytes, &path, self.workspace);
                drop(bytes);
                if !unfollowed.is_empty() {
                    self.files[file as usize].trouble = Some(Trouble::Lines(unfollowed));
                }
                let imports = imports.into_iter().map(|i| self.shape(i)).collect();
                Some(Rc::new(Scanned { imports, path, all }))
            }
            Err(trouble) => {
                self.files[file as usize].trouble = Some(trouble);
                None
            }
        };
        self.files[file as usize].scan = Some(scanned.clone());
        scanned
    }

    /// The id of an import's shape (and, when absolute, its first name learned).
    fn shape(&mut self, mut import: Import) -> u32 {
        if import.level == 0
            && let Some(first) = import.module.first()
            && !self.imported.contains(first)
        {
            self.restart |= self.pruned_names.contains(first.as_str());
            self.imported.insert(first.clone());
        }
        import.line = 0;
        if let Some(&id) = self.shape_ids.get(&import) {
            return id;
        }
        let id = self.shapes.len() as u32;
        let import = Rc::new(import);
        self.shapes.push(import.clone());
        self.shape_ids.insert(import, id);
        id
    }

    /// Inside the workspace, not the interpreter's own, and a regular file inside the workspace
    /// once links are resolved.
    fn followable(&mut self, file: FileId) -> bool {
        if let Some(f) = self.files[file as usize].followable {
            return f;
        }
        let path = &self.files[file as usize].path;
        let owned = |rel: &Path| {
            rel.components().any(|c| matches!(c, Component::Normal(n) if n == "site-packages" || n == "dist-packages"))
        };
        let followable = match path.strip_prefix(self.workspace) {
            Ok(rel) if !owned(rel) && !self.installed.iter().any(|p| path.starts_with(p)) => match self.real(file) {
                Some((real, meta)) if real.starts_with(&self.real_workspace) && meta.is_file() => true,
                Some((real, _)) => {
                    self.files[file as usize].trouble = Some(Trouble::NotRead(real));
                    self.unread.insert(file);
                    false
                }
                None => false,
            },
            _ => false,
        };
        self.files[file as usize].followable = Some(followable);
        followable
    }

    /// Whether `dir` provides a name some file imports.
    fn is_relevant(&mut self, dir: DirId) -> bool {
        if let Some(&r) = self.relevant.get(&dir) {
            return r;
        }
        let listing = self.listing(dir);
        let relevant = listing.names().any(|n| self.imported.contains(n));
        if !relevant {
            self.pruned_names.extend(listing.names().map(Box::from));
        }
        self.relevant.insert(dir, relevant);
        relevant
    }

    fn intern(&mut self, early: Vec<DirId>, late: Vec<DirId>, tail: Vec<DirId>) -> CtxId {
        let mut seen = HashSet::new();
        let mut keep = |f: &mut Self, dirs: Vec<DirId>| -> Vec<DirId> {
            dirs.into_iter().filter(|d| seen.insert(*d) && (!f.prune || f.is_relevant(*d))).collect()
        };
        let ctx = Ctx { early: keep(self, early), late: keep(self, late), tail: keep(self, tail) };
        if let Some(&id) = self.ctx_ids.get(&ctx) {
            return id;
        }
        let id = self.ctxs.len() as CtxId;
        let ctx = Rc::new(ctx);
        self.ctxs.push(ctx.clone());
        self.ctx_ids.insert(ctx, id);
        id
    }

    fn root_ctx(&mut self, root: FileId) -> CtxId {
        let dir = self.files[root as usize].dir;
        self.intern(vec![dir], self.entries.clone(), vec![self.workspace_dir])
    }

    /// The search path `ctx` with the `sys.path` changes of `file`.
    fn ctx_with(&mut self, ctx: CtxId, file: FileId, changes: &[(End, PathBuf)]) -> CtxId {
        if let Some(&id) = self.ctx_after.get(&(ctx, file)) {
            return id;
        }
        if self.ctxs.len() >= SEARCH_PATHS {
            self.over.insert(file);
            return ctx;
        }
        let base = self.ctxs[ctx as usize].clone();
        // `insert(0, …)` puts the last one inserted first.
        let mut early: Vec<DirId> =
            changes.iter().rev().filter(|(end, _)| *end == End::Front).map(|(_, p)| self.dir(p)).collect();
        early.extend(&base.early);
        let mut late = base.late.clone();
        for (_, p) in changes.iter().filter(|(end, _)| *end == End::Back) {
            late.push(self.dir(p));
        }
        let id = self.intern(early, late, base.tail.clone());
        self.ctx_after.insert((ctx, file), id);
        id
    }

    /// One traversal of every (file, search path) the roots reach; `None` when it must start over.
    fn run(&mut self, roots: &[FileId]) -> Option<HashMap<FileId, HashMap<FileId, Via>>> {
        self.ctxs.clear();
        self.ctx_ids.clear();
        self.ctx_after.clear();
        self.relevant.clear();
        self.pruned_names.clear();
        self.absolute.clear();
        self.relative.clear();
        self.over.clear();
        self.restart = false;
        let mut edges: HashMap<FileId, HashMap<FileId, Via>> = HashMap::new();
        let mut visited: HashSet<(FileId, CtxId)> = HashSet::new();
        let mut queue = VecDeque::new();
        for &root in roots {
            let ctx = self.root_ctx(root);
            if visited.insert((root, ctx)) {
                queue.push_back((root, ctx));
            }
        }
        while let Some((file, ctx)) = queue.pop_front() {
            let Some(scanned) = self.scan(file) else { continue };
            let ctx = match scanned.path.is_empty() {
                true => ctx,
                false => self.ctx_with(ctx, file, &scanned.path),
            };
            for &shape in &scanned.imports {
                let hits = self.resolve(file, shape, ctx);
                for &(module, via) in hits.iter() {
                    if module == file {
                        continue;
                    }
                    let by = edges.entry(module).or_default().entry(file).or_insert(via);
                    *by = (*by).min(via);
                    if visited.insert((module, ctx)) {
                        queue.push_back((module, ctx));
                    }
                }
            }
            if self.restart {
                return None;
            }
        }
        Some(edges)
    }

    /// The module files the import `shape` of `file` loads, under the search path `ctx`.
    fn resolve(&mut self, file: FileId, shape: u32, ctx: CtxId) -> Hits {
        let import = self.shapes[shape as usize].clone();
        let dir = self.files[file as usize].dir;
        let memo = match import.level {
            0 => self.absolute.get(&(ctx, shape)),
            _ => self.relative.get(&(dir, shape)),
        };
        if let Some(hits) = memo {
            return hits.clone();
        }
        let mut hits = Vec::new();
        let package = if import.level == 0 {
            let c = self.ctxs[ctx as usize].clone();
            let stdlib = self.search.entries.is_empty()
                && import.module.first().is_some_and(|m| STDLIB.binary_search(&m.as_str()).is_ok());
            let dirs: Vec<DirId> = match stdlib {
                true => c.early.clone(),
                false => c.early.iter().chain(&c.late).chain(&c.tail).copied().collect(),
            };
            self.dotted(&import.module, dirs, &mut hits)
        } else {
            let mut base = dir;
            for _ in 1..import.level {
                let path = self.dirs[base as usize].0.clone();
                base = self.dir(path.parent().unwrap_or(&path));
            }
            if import.module.is_empty() {
                let init = self.init(base).filter(|i| self.followable(*i));
                if let Some(init) = init {
                    hits.push((init, Via::Import));
                }
                Some((vec![base], init))
            } else {
                self.dotted(&import.module, vec![base], &mut hits)
            }
        };
        if let Some((dirs, init)) = package {
            self.submodules(&import.names, &dirs, Via::Import, &mut hits);
            if import.star
                && let Some(init) = init
                && let Some(scanned) = self.scan(init)
            {
                match &scanned.all {
                    Some(All::Names(names)) => self.submodules(names, &dirs, Via::Import, &mut hits),
                    Some(All::Computed) => self.whole(&dirs, Via::Star, &mut hits),
                    None => {}
                }
            }
            if import.whole {
                self.whole(&dirs, Via::ComputedName, &mut hits);
            }
        }
        let hits: Hits = hits.into();
        match import.level {
            0 => self.absolute.insert((ctx, shape), hits.clone()),
            _ => self.relative.insert((dir, shape), hits.clone()),
        };
        hits
    }

    /// `from package import name`: each name that is a submodule of the package in `dirs`.
    fn submodules(&mut self, names: &[String], dirs: &[DirId], via: Via, hits: &mut Vec<(FileId, Via)>) {
        for name in names {
            match self.find(name, dirs) {
                Some(Found::Module(f) | Found::Package { init: f, .. }) if self.followable(f) => hits.push((f, via)),
                _ => {}
            }
        }
    }

    /// Every module of the package in `dirs`: its `*.py` and its subpackages' `__init__.py`.
    fn whole(&mut self, dirs: &[DirId], via: Via, hits: &mut Vec<(FileId, Via)>) {
        for &dir in dirs {
            let listing = self.listing(dir);
            for (name, entry) in &listing.entries {
                if entry.module {
                    let f = self.entry_file(dir, name, entry);
                    if self.followable(f) {
                        hits.push((f, via));
                    }
                }
                if entry.dir {
                    let sub = self.entry_dir(dir, name, entry);
                    if let Some(init) = self.init(sub).filter(|i| self.followable(*i)) {
                        hits.push((init, via));
                    }
                }
            }
        }
    }

    /// Load `a.b.c` from `dirs`: each package's `__init__.py` and the module, pushed on `hits`;
    /// the directories of the last part when it is a package (and its `__init__.py`).
    fn dotted(
        &mut self,
        parts: &[String],
        mut dirs: Vec<DirId>,
        hits: &mut Vec<(FileId, Via)>,
    ) -> Option<(Vec<DirId>, Option<FileId>)> {
        let mut init = None;
        for part in parts {
            match self.find(part, &dirs)? {
                Found::Module(f) => {
                    if self.followable(f) {
                        hits.push((f, Via::Import));
                    }
                    return None;
                }
                Found::Extension => return None,
                Found::Package { dir, init: i } => {
                    if !self.followable(i) {
                        return None;
                    }
                    hits.push((i, Via::Import));
                    (dirs, init) = (vec![dir], Some(i));
                }
                Found::Namespace(portions) => {
                    let followable: Vec<DirId> = portions.into_iter().filter(|p| self.dir_followable(*p)).collect();
                    if followable.is_empty() {
                        return None;
                    }
                    (dirs, init) = (followable, None);
                }
            }
        }
        Some((dirs, init))
    }

    fn dir_followable(&self, dir: DirId) -> bool {
        let path = &self.dirs[dir as usize].0;
        path.starts_with(self.workspace) && !self.installed.iter().any(|p| path.starts_with(p))
    }

    /// Where `name` is in `dirs`, as the interpreter's path finder looks: the first directory with
    /// a package, an extension module or a module wins; directories of that name without
    /// `__init__.py` are the portions of a namespace package when no directory has more.
    fn find(&mut self, name: &str, dirs: &[DirId]) -> Option<Found> {
        let mut portions = Vec::new();
        for &dir in dirs {
            let listing = self.listing(dir);
            let Some(entry) = listing.entries.get(name) else { continue };
            let sub = entry.dir.then(|| self.entry_dir(dir, name, entry));
            if let Some(init) = sub.and_then(|sub| self.init(sub)) {
                return Some(Found::Package { dir: sub.expect("a package is a directory"), init });
            }
            if entry.extension {
                return Some(Found::Extension);
            }
            if entry.module {
                return Some(Found::Module(self.entry_file(dir, name, entry)));
            }
            portions.extend(sub);
        }
        (!portions.is_empty()).then_some(Found::Namespace(portions))
    }

    fn finish(self, roots: &[FileId], edges: HashMap<FileId, HashMap<FileId, Via>>) -> Followed {
        let path = |f: FileId| self.files[f as usize].path.clone();
        let reached: Vec<(usize, Vec<(usize, Via)>)> = edges
            .iter()
            .map(|(m, by)| (*m as usize, by.iter().map(|(f, via)| (*f as usize, *via)).collect()))
            .collect();
        let touched: HashSet<FileId> = roots.iter().chain(edges.keys()).chain(&self.unread).copied().collect();
        let mut troubles: Vec<(PathBuf, Trouble)> = touched
            .into_iter()
            .filter_map(|f| {
                let trouble = match (&self.files[f as usize].trouble, self.over.contains(&f)) {
                    (Some(Trouble::Lines(lines)), true) => Trouble::Lines(with_cut(lines)),
                    (Some(t), _) => t.clone(),
                    (None, true) => Trouble::Lines(vec![(0, Unfollowed::TooLong)]),
                    (None, false) => return None,
                };
                Some((path(f), trouble))
            })
            .collect();
        troubles.sort_by(|a, b| a.0.cmp(&b.0));
        let paths = self.files.into_iter().map(|f| f.path).collect();
        Followed { paths, reached, troubles }
    }
}

fn with_cut(lines: &[(u32, Unfollowed)]) -> Vec<(u32, Unfollowed)> {
    let mut lines = lines.to_vec();
    lines.push((0, Unfollowed::TooLong));
    lines
}

/// The standard library's top-level modules on every CPython from 3.11 to 3.13
/// (`sys.stdlib_module_names` of 3.11 without those 3.12 and 3.13 removed), sorted.
#[rustfmt::skip]
const STDLIB: &[&str] = &[
    "__future__", "_abc", "_aix_support", "_ast", "_asyncio", "_bisect", "_blake2", "_bootsubprocess", "_bz2",
    "_codecs", "_codecs_cn", "_codecs_hk", "_codecs_iso2022", "_codecs_jp", "_codecs_kr", "_codecs_tw",
    "_collections", "_collections_abc", "_compat_pickle", "_compression", "_contextvars", "_csv", "_ctypes",
    "_curses", "_curses_panel", "_datetime", "_dbm", "_decimal", "_elementtree", "_frozen_importlib",
    "_frozen_importlib_external", "_functools", "_gdbm", "_hashlib", "_heapq", "_imp", "_io", "_json", "_locale",
    "_lsprof", "_lzma", "_markupbase", "_md5", "_multibytecodec", "_multiprocessing", "_opcode", "_operator",
    "_osx_support", "_overlapped", "_pickle", "_posixshmem", "_posixsubprocess", "_py_abc", "_pydecimal", "_pyio",
    "_queue", "_random", "_scproxy", "_sha1", "_sha256", "_sha3", "_sha512", "_signal", "_sitebuiltins", "_socket",
    "_sqlite3", "_sre", "_ssl", "_stat", "_statistics", "_string", "_strptime", "_struct", "_symtable", "_thread",
    "_threading_local", "_tkinter", "_tokenize", "_tracemalloc", "_typing", "_uuid", "_warnings", "_weakref",
    "_weakrefset", "_winapi", "_zoneinfo", "abc", "antigravity", "argparse", "array", "ast", "asyncio", "atexit",
    "base64", "bdb", "binascii", "bisect", "builtins", "bz2", "cProfile", "calendar", "cmath", "cmd", "code",
    "codecs", "codeop", "collections", "colorsys", "compileall", "concurrent", "configparser", "contextlib",
    "contextvars", "copy", "copyreg", "csv", "ctypes", "curses", "dataclasses", "datetime", "dbm", "decimal",
    "difflib", "dis", "doctest", "email", "encodings", "ensurepip", "enum", "errno", "faulthandler", "fcntl",
    "filecmp", "fileinput", "fnmatch", "fractions", "ftplib", "functools", "gc", "genericpath", "getopt", "getpass",
    "gettext", "glob", "graphlib", "grp", "gzip", "hashlib", "heapq", "hmac", "html", "http", "idlelib", "imaplib",
    "importlib", "inspect", "io", "ipaddress", "itertools", "json", "keyword", "linecache", "locale", "logging",
    "lzma", "mailbox", "marshal", "math", "mimetypes", "mmap", "modulefinder", "msvcrt", "multiprocessing", "netrc",
    "nt", "ntpath", "nturl2path", "numbers", "opcode", "operator", "optparse", "os", "pathlib", "pdb", "pickle",
    "pickletools", "pkgutil", "platform", "plistlib", "poplib", "posix", "posixpath", "pprint", "profile", "pstats",
    "pty", "pwd", "py_compile", "pyclbr", "pydoc", "pydoc_data", "pyexpat", "queue", "quopri", "random", "re",
    "readline", "reprlib", "resource", "rlcompleter", "runpy", "sched", "secrets", "select", "selectors", "shelve",
    "shlex", "shutil", "signal", "site", "smtplib", "socket", "socketserver", "sqlite3", "sre_compile",
    "sre_constants", "sre_parse", "ssl", "stat", "statistics", "string", "stringprep", "struct", "subprocess",
    "symtable", "sys", "sysconfig", "syslog", "tabnanny", "tarfile", "tempfile", "termios", "textwrap", "this",
    "threading", "time", "timeit", "tkinter", "token", "tokenize", "tomllib", "trace", "traceback", "tracemalloc",
    "tty", "turtle", "turtledemo", "types", "typing", "unicodedata", "unittest", "urllib", "uuid", "venv",
    "warnings", "wave", "weakref", "webbrowser", "winreg", "winsound", "wsgiref", "xml", "xmlrpc", "zipapp",
    "zipfile", "zipimport", "zlib", "zoneinfo",
];

#[cfg(test)]
mod tests {
    use super::*;

    /// A workspace of `(path, text)` files; the reached modules as workspace-relative paths, each
    /// with its importers (and how, when not a plain import).
    fn reached(files: &[(&str, &str)], roots: &[&str], search: impl Fn(&Path) -> SearchPath) -> Vec<(String, String)> {
        let dir = tempfile::tempdir().unwrap();
        write_all(dir.path(), files);
        let ws = dir.path().join("ws");
        let roots: Vec<PathBuf> = roots.iter().map(|r| ws.join(r)).collect();
        let rel = |p: &Path| p.strip_prefix(&ws).unwrap().to_string_lossy().into_owned();
        let how = |via: &Via| match via {
            Via::Import => "",
            Via::ComputedName => " (computed)",
            Via::Star => " (*)",
        };
        follow(&roots, &ws, &search(dir.path()))
            .by_path()
            .into_iter()
            .map(|(m, by)| {
                (rel(m), by.iter().map(|(p, via)| format!("{}{}", rel(p), how(via))).collect::<Vec<_>>().join(", "))
            })
            .collect()
    }

    fn write_all(root: &Path, files: &[(&str, &str)]) {
        for (path, text) in files {
            let p = root.join(path);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        }
    }

    fn none(_: &Path) -> SearchPath {
        SearchPath::default()
    }

    fn pairs(p: &[(&str, &str)]) -> Vec<(String, String)> {
        p.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect()
    }

    #[test]
    fn each_import_form_reaches_its_module_file() {
        let files = [
            (
                "ws/tools/gen.py",
                "import a.b\nfrom . import sibling\nfrom pkg import mod\nfrom helpers.weights import SCALE\n\
                 def f():\n    import infunc\ntry:\n    import intry\nexcept ImportError:\n    pass\n\
                 import importlib\nm = importlib.import_module(\"dyn.target\")\n",
            ),
            ("ws/tools/a/__init__.py", ""),
            ("ws/tools/a/b.py", ""),
            ("ws/tools/sibling.py", ""),
            ("ws/tools/pkg/__init__.py", ""),
            ("ws/tools/pkg/mod.py", ""),
            ("ws/tools/helpers/weights.py", "SCALE = 1\n"),
            ("ws/tools/infunc.py", ""),
            ("ws/tools/intry.py", ""),
            ("ws/tools/dyn/target.py", ""),
        ];
        assert_eq!(
            reached(&files, &["tools/gen.py"], none),
            pairs(&[
                ("tools/a/__init__.py", "tools/gen.py"),
                ("tools/a/b.py", "tools/gen.py"),
                ("tools/dyn/target.py", "tools/gen.py"),
                ("tools/helpers/weights.py", "tools/gen.py"),
                ("tools/infunc.py", "tools/gen.py"),
                ("tools/intry.py", "tools/gen.py"),
                ("tools/pkg/__init__.py", "tools/gen.py"),
                ("tools/pkg/mod.py", "tools/gen.py"),
                ("tools/sibling.py", "tools/gen.py"),
            ])
        );
    }

    #[test]
    fn imports_are_followed_transitively_through_cycles_and_package_inits() {
        let files = [
            ("ws/gen.py", "import lib.one\n"),
            ("ws/lib/__init__.py", "from .shared import CONSTANT\nfrom . import one\n"),
            ("ws/lib/shared.py", "CONSTANT = 1\n"),
            ("ws/lib/one.py", "from . import two\n"),
            ("ws/lib/two.py", "from lib import one  # a cycle\nfrom .. import top\n"),
            ("ws/top.py", ""),
        ];
        // A package's `__init__` is not its own importer.
        assert_eq!(
            reached(&files, &["gen.py"], none),
            pairs(&[
                ("lib/__init__.py", "gen.py, lib/one.py, lib/two.py"),
                ("lib/one.py", "gen.py, lib/__init__.py, lib/two.py"),
                ("lib/shared.py", "lib/__init__.py"),
                ("lib/two.py", "lib/one.py"),
                ("top.py", "lib/two.py"),
            ])
        );
    }

    #[test]
    fn modules_outside_the_workspace_or_installed_are_not_followed_and_missing_ones_are_no_error() {
        let files = [
            (
                "ws/tools/gen.py",
                "import sys\nsys.path.insert(0, \"../outside\")\nimport far\nimport torch\nimport not_there\n\
                 from not_there_either import x\nimport json\nimport local\n",
            ),
            ("outside/far.py", "import local_to_far\n"),
            ("outside/local_to_far.py", ""),
            ("ws/.venv/lib/python3.12/site-packages/torch/__init__.py", "import torch.nn\n"),
            ("ws/.venv/lib/python3.12/site-packages/torch/nn.py", ""),
            ("stdlib/json/__init__.py", ""),
            ("ws/json.py", "# the standard library's comes first"),
            ("ws/tools/local.py", ""),
        ];
        let search = |root: &Path| SearchPath {
            entries: vec![root.join("stdlib"), root.join("ws/.venv/lib/python3.12/site-packages")],
            installed: vec![root.join("stdlib"), root.join("ws/.venv")],
        };
        let local = pairs(&[("tools/local.py", "tools/gen.py")]);
        assert_eq!(reached(&files, &["tools/gen.py"], search), local);
        // Without the interpreter's own places, site-packages is still never followed.
        let only_path = |root: &Path| SearchPath { installed: vec![root.join("stdlib")], ..search(root) };
        assert_eq!(reached(&files, &["tools/gen.py"], only_path), local);
        // Without an interpreter at all, `json` is the standard library's: the workspace's is not
        // looked for.
        assert_eq!(reached(&files, &["tools/gen.py"], none), local);
    }

    #[test]
    fn the_scripts_directory_comes_first_and_a_regular_package_beats_a_namespace() {
        let files = [
            ("ws/tools/gen.py", "import helpers\nimport ns.mod\nimport json\n"),
            ("ws/tools/helpers.py", ""),
            ("ws/helpers.py", ""),
            ("ws/tools/ns/mod.py", ""),
            ("ws/ns/__init__.py", ""),
            ("ws/ns/mod.py", ""),
            // The script's directory shadows the standard library.
            ("ws/tools/json.py", ""),
        ];
        assert_eq!(
            reached(&files, &["tools/gen.py"], none),
            pairs(&[
                ("ns/__init__.py", "tools/gen.py"),
                ("ns/mod.py", "tools/gen.py"),
                ("tools/helpers.py", "tools/gen.py"),
                ("tools/json.py", "tools/gen.py"),
            ])
        );
    }

    /// Scripts in different directories share what they reach, and each still sees its own
    /// directory: a script whose directory holds a name another file imports gets its own.
    #[test]
    fn each_script_resolves_in_its_own_directory() {
        let files = [
            ("ws/a/gen.py", "import common\nimport lib.x\n"),
            ("ws/a/common.py", ""),
            ("ws/b/gen.py", "import common\nimport lib.x\n"),
            ("ws/b/common.py", ""),
            ("ws/c/gen.py", "import lib.x\n"),
            ("ws/c/unrelated.py", ""),
            ("ws/lib/__init__.py", ""),
            ("ws/lib/x.py", "import common\n"),
            ("ws/common.py", ""),
        ];
        assert_eq!(
            reached(&files, &["a/gen.py", "b/gen.py", "c/gen.py"], none),
            pairs(&[
                ("a/common.py", "a/gen.py, lib/x.py"),
                ("b/common.py", "b/gen.py, lib/x.py"),
                ("common.py", "lib/x.py"),
                ("lib/__init__.py", "a/gen.py, b/gen.py, c/gen.py"),
                ("lib/x.py", "a/gen.py, b/gen.py, c/gen.py"),
            ])
        );
    }

    #[test]
    fn sys_path_changes_apply_to_what_the_file_imports_and_what_that_reaches() {
        let files = [
            (
                "ws/source/tests/infer/gen_a.py",
                "import os, sys\nsys.path.insert(0, os.path.abspath(os.path.dirname(__file__) + \"/..\"))\n\
                 sys.path[:0] = [os.path.join(os.path.dirname(__file__), \"..\", \"..\", \"..\")]\n\
                 from dpa4_fixtures import x\nimport deepmd.model\n",
            ),
            ("ws/source/tests/dpa4_fixtures.py", "import helper_of_fixtures\n"),
            ("ws/source/tests/helper_of_fixtures.py", ""),
            ("ws/deepmd/__init__.py", ""),
            ("ws/deepmd/model.py", ""),
        ];
        assert_eq!(
            reached(&files, &["source/tests/infer/gen_a.py"], none),
            pairs(&[
                ("deepmd/__init__.py", "source/tests/infer/gen_a.py"),
                ("deepmd/model.py", "source/tests/infer/gen_a.py"),
                ("source/tests/dpa4_fixtures.py", "source/tests/infer/gen_a.py"),
                ("source/tests/helper_of_fixtures.py", "source/tests/dpa4_fixtures.py"),
            ])
        );
    }

    /// deepmd-kit's `deepmd/backend/__init__.py`: every module of the package's directory.
    #[test]
    fn a_directory_loaded_by_computed_name_is_covered() {
        let init = "from importlib import import_module\nfrom pathlib import Path\nPACKAGE_BASE = \"pkg.backend\"\n\
                    for module_file in Path(__file__).parent.glob(\"*.py\"):\n\
                    \x20   if module_file.name != \"__init__.py\":\n\
                    \x20       import_module(f\".{module_file.stem}\", PACKAGE_BASE)\n";
        let files = [
            ("ws/gen.py", "import pkg.backend\n"),
            ("ws/pkg/__init__.py", ""),
            ("ws/pkg/backend/__init__.py", init),
            ("ws/pkg/backend/pytorch.py", "from .helpers import h\n"),
            ("ws/pkg/backend/jax.py", ""),
            ("ws/pkg/backend/helpers/__init__.py", ""),
            ("ws/pkg/backend/notes.txt", ""),
        ];
        assert_eq!(
            reached(&files, &["gen.py"], none),
            pairs(&[
                ("pkg/__init__.py", "gen.py, pkg/backend/__init__.py"),
                ("pkg/backend/__init__.py", "gen.py"),
                ("pkg/backend/helpers/__init__.py", "pkg/backend/__init__.py (computed), pkg/backend/pytorch.py"),
                ("pkg/backend/jax.py", "pkg/backend/__init__.py (computed)"),
                ("pkg/backend/pytorch.py", "pkg/backend/__init__.py (computed)"),
            ])
        );
    }

    #[test]
    fn star_imports_follow_a_literal_all_or_the_whole_package() {
        let files = [
            ("ws/gen.py", "from lit import *\nfrom comp import *\nfrom none import *\n"),
            ("ws/lit/__init__.py", "__all__ = [\"a\", \"b\", \"CONSTANT\"]\nCONSTANT = 1\n"),
            ("ws/lit/a.py", ""),
            ("ws/lit/b.py", ""),
            ("ws/lit/c.py", ""),
            ("ws/comp/__init__.py", "__all__ = [n for n in dir() if not n.startswith('_')]\n"),
            ("ws/comp/x.py", ""),
            ("ws/none/__init__.py", "X = 1\n"),
            ("ws/none/y.py", ""),
        ];
        assert_eq!(
            reached(&files, &["gen.py"], none),
            pairs(&[
                ("comp/__init__.py", "gen.py"),
                ("comp/x.py", "gen.py (*)"),
                ("lit/__init__.py", "gen.py"),
                ("lit/a.py", "gen.py"),
                ("lit/b.py", "gen.py"),
                ("none/__init__.py", "gen.py"),
            ])
        );
    }

    #[cfg(unix)]
    #[test]
    fn unfollowed_lines_large_files_and_links_out_are_troubles() {
        let dir = tempfile::tempdir().unwrap();
        write_all(
            dir.path(),
            &[
                (
                    "ws/gen.py",
                    "import sys, os\nsys.path.insert(0, os.environ['X'])\nimport big\nimport helper\nm = import_module(name)\n\
                     from sub import linked\n",
                ),
                ("secret.py", "SECRET = 1\n"),
            ],
        );
        let ws = dir.path().join("ws");
        std::fs::write(ws.join("big.py"), vec![b'#'; SCAN_LIMIT as usize + 1]).unwrap();
        std::os::unix::fs::symlink(dir.path().join("secret.py"), ws.join("helper.py")).unwrap();
        std::fs::create_dir(ws.join("sub")).unwrap();
        std::fs::write(ws.join("sub/__init__.py"), "").unwrap();
        std::os::unix::fs::symlink("/proc/self/pagemap", ws.join("sub/linked.py")).unwrap();
        let followed = follow(&[ws.join("gen.py")], &ws, &SearchPath::default());
        assert_eq!(followed.by_path().keys().collect::<Vec<_>>(), [&ws.join("big.py"), &ws.join("sub/__init__.py")]);
        assert_eq!(
            followed.troubles,
            [
                (ws.join("big.py"), Trouble::TooLarge(SCAN_LIMIT + 1)),
                (ws.join("gen.py"), Trouble::Lines(vec![(2, Unfollowed::SysPath), (5, Unfollowed::ComputedName)])),
                (ws.join("helper.py"), Trouble::NotRead(std::fs::canonicalize(dir.path().join("secret.py")).unwrap())),
                (ws.join("sub/linked.py"), Trouble::NotRead(std::fs::canonicalize("/proc/self/pagemap").unwrap())),
            ]
        );
    }

    #[test]
    fn python_files_are_found_by_suffix_or_first_line() {
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, text: &str| {
            std::fs::write(dir.path().join(name), text).unwrap();
            dir.path().join(name)
        };
        assert!(is_python(&write("a.py", "")));
        assert!(is_python(&write("gen", "#!/usr/bin/env python3\nimport x\n")));
        assert!(!is_python(&write("run.sh", "#!/bin/sh\npython3 gen.py\n")));
    }

    #[test]
    fn the_standard_library_list_is_sorted() {
        assert!(STDLIB.windows(2).all(|w| w[0] < w[1]));
        assert!(STDLIB.binary_search(&"typing").is_ok() && STDLIB.binary_search(&"imp").is_err());
    }
}
