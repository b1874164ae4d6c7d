//! What a Python file imports, read statically: a small tokenizer (names, string literals,
//! numbers, operators and logical line ends; comments and the inside of strings skipped) and a
//! scan of its tokens for `import a.b`, `from .x import y`, `importlib.import_module("literal")`,
//! `__import__("literal")` and `sys.path.insert`/`append` of paths that can be worked out
//! without running anything (string literals, `__file__`, `os.path.dirname/join/abspath`,
//! `pathlib.Path(...).parent`, `/`, and names assigned such values). Nothing is executed.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Name(String),
    /// A string literal's value; `None` for an f-string (not a literal).
    Str(Option<String>),
    Num(String),
    Op(char),
    /// The end of a logical line.
    End,
}

/// One import a file makes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Import {
    /// Leading dots of a relative import (0: absolute).
    pub level: usize,
    /// The dotted module, `a.b` → `["a", "b"]` (empty for `from . import x`).
    pub module: Vec<String>,
    /// `from … import` names: each may be a submodule (`*` is left out).
    pub names: Vec<String>,
}

/// What [`scan`] finds in one file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Scan {
    pub imports: Vec<Import>,
    /// `sys.path.insert(…)` paths, in order.
    pub inserted: Vec<PathBuf>,
    /// `sys.path.append(…)` paths, in order.
    pub appended: Vec<PathBuf>,
}

fn is_prefix(word: &str) -> bool {
    matches!(word.to_ascii_lowercase().as_str(), "r" | "u" | "b" | "f" | "br" | "rb" | "fr" | "rf")
}

fn tokenize(src: &str) -> Vec<Tok> {
    let chars: Vec<char> = src.chars().collect();
    let mut toks = Vec::new();
    let mut depth = 0usize;
    let mut i = 0;
    let end_line = |toks: &mut Vec<Tok>| {
        if !matches!(toks.last(), None | Some(Tok::End)) {
            toks.push(Tok::End);
        }
    };
    while i < chars.len() {
        let c = chars[i];
        if c == '#' {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '\\' && chars.get(i + 1) == Some(&'\n') {
            i += 2;
        } else if c == '\\' && chars.get(i + 1) == Some(&'\r') {
            i += 3;
        } else if c == '\n' {
            if depth == 0 {
                end_line(&mut toks);
            }
            i += 1;
        } else if c.is_whitespace() {
            i += 1;
        } else if c == '"' || c == '\'' {
            let (tok, next) = string(&chars, i, "");
            toks.push(tok);
            i = next;
        } else if c.is_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            if i < chars.len() && (chars[i] == '"' || chars[i] == '\'') && is_prefix(&word) {
                let (tok, next) = string(&chars, i, &word);
                toks.push(tok);
                i = next;
            } else {
                toks.push(Tok::Name(word));
            }
        } else if c.is_ascii_digit() {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_' || chars[i] == '.') {
                i += 1;
            }
            toks.push(Tok::Num(chars[start..i].iter().collect()));
        } else {
            match c {
                '(' | '[' | '{' => depth += 1,
                ')' | ']' | '}' => depth = depth.saturating_sub(1),
                _ => {}
            }
            toks.push(Tok::Op(c));
            i += 1;
        }
    }
    end_line(&mut toks);
    toks
}

/// The string literal starting at `chars[at]` (a quote), with `prefix` before it; the token and
/// the index after it.
fn string(chars: &[char], at: usize, prefix: &str) -> (Tok, usize) {
    let prefix = prefix.to_ascii_lowercase();
    let (raw, formatted) = (prefix.contains('r'), prefix.contains('f'));
    let q = chars[at];
    let triple = chars.get(at + 1) == Some(&q) && chars.get(at + 2) == Some(&q);
    let mut i = at + if triple { 3 } else { 1 };
    let mut value = String::new();
    while i < chars.len() {
        let c = chars[i];
        if c == '\\' && i + 1 < chars.len() {
            let next = chars[i + 1];
            if raw {
                value.push(c);
                value.push(next);
            } else {
                match next {
                    'n' => value.push('\n'),
                    't' => value.push('\t'),
                    '\n' => {}
                    other => value.push(other),
                }
            }
            i += 2;
            continue;
        }
        if c == q && (!triple || (chars.get(i + 1) == Some(&q) && chars.get(i + 2) == Some(&q))) {
            i += if triple { 3 } else { 1 };
            return (Tok::Str((!formatted).then_some(value)), i);
        }
        // An unterminated one-line string ends at the line's end.
        if c == '\n' && !triple {
            return (Tok::Str(None), i);
        }
        value.push(c);
        i += 1;
    }
    (Tok::Str(None), i)
}

/// A value an expression may have: a path (absolute) or a text.
#[derive(Clone, Debug)]
enum Val {
    Path(PathBuf),
    Text(String),
}

impl Val {
    fn path(self, cwd: &Path) -> PathBuf {
        match self {
            Val::Path(p) => p,
            Val::Text(t) => crate::paths::normalize(&cwd.join(t)),
        }
    }
}

/// Scan `src`, the text of `file`; relative paths in `sys.path` are taken relative to `cwd`
/// (the workspace, where generators run).
pub fn scan(src: &str, file: &Path, cwd: &Path) -> Scan {
    let toks = tokenize(src);
    let mut scan = Scan::default();
    let mut vars: HashMap<String, Val> = HashMap::new();
    let name = |i: usize| match toks.get(i) {
        Some(Tok::Name(n)) => Some(n.as_str()),
        _ => None,
    };
    let op = |i: usize, c: char| toks.get(i) == Some(&Tok::Op(c));
    let mut i = 0;
    while i < toks.len() {
        let at_start = i == 0 || matches!(toks[i - 1], Tok::End | Tok::Op(';') | Tok::Op(':'));
        match &toks[i] {
            Tok::Name(w) if at_start && w == "import" => {
                i += 1;
                loop {
                    let (module, next) = dotted(&toks, i);
                    i = next;
                    if !module.is_empty() {
                        scan.imports.push(Import { level: 0, module, names: Vec::new() });
                    }
                    if name(i) == Some("as") {
                        i += 2;
                    }
                    if op(i, ',') {
                        i += 1;
                    } else {
                        break;
                    }
                }
                continue;
            }
            Tok::Name(w) if at_start && w == "from" => {
                i += 1;
                let mut level = 0;
                while op(i, '.') {
                    level += 1;
                    i += 1;
                }
                let (module, next) = dotted(&toks, i);
                i = next;
                if name(i) != Some("import") {
                    continue;
                }
                i += 1;
                let mut names = Vec::new();
                while let Some(tok) = toks.get(i) {
                    match tok {
                        Tok::Name(n) if n == "as" => i += 1,
                        Tok::Name(n) if !matches!(toks.get(i - 1), Some(Tok::Name(a)) if a == "as") => {
                            names.push(n.clone())
                        }
                        Tok::Name(_) | Tok::Op('(' | ')' | ',' | '*') => {}
                        _ => break,
                    }
                    i += 1;
                }
                scan.imports.push(Import { level, module, names });
                continue;
            }
            Tok::Name(w) if (w == "import_module" || w == "__import__") && op(i + 1, '(') => {
                if let Some(Tok::Str(Some(target))) = toks.get(i + 2) {
                    let package = match (toks.get(i + 3), toks.get(i + 4), toks.get(i + 5), toks.get(i + 6)) {
                        (Some(Tok::Op(',')), Some(Tok::Str(Some(p))), _, _) => Some(p.clone()),
                        (Some(Tok::Op(',')), Some(Tok::Name(k)), Some(Tok::Op('=')), Some(Tok::Str(Some(p))))
                            if k == "package" =>
                        {
                            Some(p.clone())
                        }
                        _ => None,
                    };
                    if let Some(import) = literal_import(target, package.as_deref(), w == "import_module") {
                        scan.imports.push(import);
                    }
                }
            }
            Tok::Name(w)
                if w == "sys"
                    && op(i + 1, '.')
                    && name(i + 2) == Some("path")
                    && op(i + 3, '.')
                    && matches!(name(i + 4), Some("insert" | "append"))
                    && op(i + 5, '(') =>
            {
                let insert = name(i + 4) == Some("insert");
                let close = matching(&toks, i + 5);
                let mut arg = i + 6;
                if insert {
                    while arg < close && !op(arg, ',') {
                        arg += 1;
                    }
                    arg += 1;
                }
                if let Some(v) = (Eval { toks: &toks[arg.min(close)..close], file, vars: &vars }).whole() {
                    let path = v.path(cwd);
                    if insert { scan.inserted.push(path) } else { scan.appended.push(path) }
                }
                i = close;
            }
            Tok::Name(w) if at_start && op(i + 1, '=') && !op(i + 2, '=') => {
                let end =
                    (i + 2..toks.len()).find(|&j| matches!(toks[j], Tok::End | Tok::Op(';'))).unwrap_or(toks.len());
                match (Eval { toks: &toks[i + 2..end], file, vars: &vars }).whole() {
                    Some(v) => vars.insert(w.clone(), v),
                    None => vars.remove(w),
                };
            }
            _ => {}
        }
        i += 1;
    }
    scan
}

/// `importlib.import_module(target, package)` or `__import__(target)` as an import.
fn literal_import(target: &str, package: Option<&str>, relative_allowed: bool) -> Option<Import> {
    let level = target.chars().take_while(|c| *c == '.').count();
    let split = |s: &str| s.split('.').filter(|p| !p.is_empty()).map(str::to_owned).collect::<Vec<_>>();
    if level == 0 {
        return Some(Import { level: 0, module: split(target), names: Vec::new() });
    }
    // A relative name is taken from its literal package, as an absolute import.
    let package = package.filter(|_| relative_allowed)?;
    let mut module = split(package);
    for _ in 1..level {
        module.pop()?;
    }
    module.extend(split(&target[level..]));
    Some(Import { level: 0, module, names: Vec::new() })
}

/// A dotted name starting at `toks[i]`, and the index after it.
fn dotted(toks: &[Tok], mut i: usize) -> (Vec<String>, usize) {
    let mut parts = Vec::new();
    while let Some(Tok::Name(n)) = toks.get(i) {
        if n == "import" || n == "as" {
            break;
        }
        parts.push(n.clone());
        i += 1;
        if toks.get(i) == Some(&Tok::Op('.')) {
            i += 1;
        } else {
            break;
        }
    }
    (parts, i)
}

/// The index of the bracket closing the one at `open` (or the end).
fn matching(toks: &[Tok], open: usize) -> usize {
    let mut depth = 0usize;
    for (j, t) in toks.iter().enumerate().skip(open) {
        match t {
            Tok::Op('(' | '[' | '{') => depth += 1,
            Tok::Op(')' | ']' | '}') => {
                depth -= 1;
                if depth == 0 {
                    return j;
                }
            }
            Tok::End => return j,
            _ => {}
        }
    }
    toks.len()
}

/// The few path expressions worth understanding, over a slice of tokens.
struct Eval<'a> {
    toks: &'a [Tok],
    file: &'a Path,
    vars: &'a HashMap<String, Val>,
}

impl Eval<'_> {
    /// The value of the whole slice, when every token is understood.
    fn whole(&self) -> Option<Val> {
        let (v, end) = self.expr(0)?;
        (end == self.toks.len()).then_some(v)
    }

    fn expr(&self, i: usize) -> Option<(Val, usize)> {
        let (mut v, mut i) = self.postfix(i)?;
        while self.toks.get(i) == Some(&Tok::Op('/')) {
            let (rhs, next) = self.postfix(i + 1)?;
            v = join(v, rhs);
            i = next;
        }
        Some((v, i))
    }

    fn args(&self, mut i: usize) -> Option<(Vec<Val>, usize)> {
        let mut args = Vec::new();
        loop {
            if self.toks.get(i) == Some(&Tok::Op(')')) {
                return Some((args, i + 1));
            }
            let (v, next) = self.expr(i)?;
            args.push(v);
            i = next;
            match self.toks.get(i) {
                Some(Tok::Op(',')) => i += 1,
                Some(Tok::Op(')')) => return Some((args, i + 1)),
                _ => return None,
            }
        }
    }

    fn postfix(&self, i: usize) -> Option<(Val, usize)> {
        let (mut v, mut i) = self.primary(i)?;
        loop {
            match (self.toks.get(i), self.toks.get(i + 1)) {
                (Some(Tok::Op('.')), Some(Tok::Name(m))) => match m.as_str() {
                    "parent" => {
                        v = Val::Path(parent(v.path(Path::new("/"))));
                        i += 2;
                    }
                    "parents" => {
                        let (Some(Tok::Op('[')), Some(Tok::Num(n)), Some(Tok::Op(']'))) =
                            (self.toks.get(i + 2), self.toks.get(i + 3), self.toks.get(i + 4))
                        else {
                            return None;
                        };
                        let mut p = v.path(Path::new("/"));
                        for _ in 0..=n.parse::<usize>().ok()? {
                            p = parent(Val::Path(p).path(Path::new("/")));
                        }
                        v = Val::Path(p);
                        i += 5;
                    }
                    "resolve" | "absolute" | "expanduser" if self.toks.get(i + 2) == Some(&Tok::Op('(')) => {
                        let (_, next) = self.args(i + 3)?;
                        i = next;
                    }
                    "joinpath" if self.toks.get(i + 2) == Some(&Tok::Op('(')) => {
                        let (args, next) = self.args(i + 3)?;
                        v = args.into_iter().fold(v, join);
                        i = next;
                    }
                    _ => return None,
                },
                _ => return Some((v, i)),
            }
        }
    }

    fn primary(&self, i: usize) -> Option<(Val, usize)> {
        match self.toks.get(i)? {
            Tok::Str(Some(s)) => Some((Val::Text(s.clone()), i + 1)),
            Tok::Op('(') => {
                let (v, next) = self.expr(i + 1)?;
                (self.toks.get(next) == Some(&Tok::Op(')'))).then_some((v, next + 1))
            }
            Tok::Name(_) => {
                // A dotted name: a variable, `__file__`, or a function that is called.
                let (parts, next) = dotted(self.toks, i);
                if self.toks.get(next) == Some(&Tok::Op('(')) {
                    let (args, after) = self.args(next + 1)?;
                    return Some((self.call(parts.last()?, args)?, after));
                }
                match parts.as_slice() {
                    [n] if n == "__file__" => Some((Val::Path(self.file.to_owned()), next)),
                    [n] => Some((self.vars.get(n)?.clone(), next)),
                    _ => None,
                }
            }
            _ => None,
        }
    }

    fn call(&self, function: &str, args: Vec<Val>) -> Option<Val> {
        let mut args = args.into_iter();
        match function {
            "dirname" => Some(Val::Path(parent(args.next()?.path(Path::new("/"))))),
            "abspath" | "realpath" | "normpath" | "Path" | "PurePath" | "str" | "fspath" => {
                let v = args.next()?;
                args.next().is_none().then_some(v)
            }
            "join" => {
                let first = args.next()?;
                Some(args.fold(first, join))
            }
            _ => None,
        }
    }
}

fn parent(p: PathBuf) -> PathBuf {
    p.parent().map(Path::to_owned).unwrap_or(p)
}

fn join(base: Val, rest: Val) -> Val {
    match (base, rest) {
        (_, Val::Path(p)) => Val::Path(p),
        (Val::Path(b), Val::Text(t)) => Val::Path(crate::paths::normalize(&b.join(t))),
        (Val::Text(b), Val::Text(t)) => Val::Text(Path::new(&b).join(t).to_string_lossy().into_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn imports(src: &str) -> Vec<(usize, String, Vec<String>)> {
        scan(src, Path::new("/ws/tools/gen.py"), Path::new("/ws"))
            .imports
            .into_iter()
            .map(|i| (i.level, i.module.join("."), i.names))
            .collect()
    }

    fn names(n: &[&str]) -> Vec<String> {
        n.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn each_import_form_is_found() {
        let src = r#"
import a.b, c as d
from . import x
from ..pkg.mod import (one,
    two as three)
from helpers.weights import SCALE; import e
def f():
    import inside_function
try:
    import optional_module
except ImportError:
    pass
if True: import after_colon
mod = importlib.import_module("dynamic.mod")
rel = importlib.import_module(".sub", "pkg.inner")
rel2 = import_module("..up", package="pkg.inner")
legacy = __import__("legacy")
from star import *
"#;
        assert_eq!(
            imports(src),
            vec![
                (0, "a.b".into(), names(&[])),
                (0, "c".into(), names(&[])),
                (1, "".into(), names(&["x"])),
                (2, "pkg.mod".into(), names(&["one", "two"])),
                (0, "helpers.weights".into(), names(&["SCALE"])),
                (0, "e".into(), names(&[])),
                (0, "inside_function".into(), names(&[])),
                (0, "optional_module".into(), names(&[])),
                (0, "after_colon".into(), names(&[])),
                (0, "dynamic.mod".into(), names(&[])),
                (0, "pkg.inner.sub".into(), names(&[])),
                (0, "pkg.up".into(), names(&[])),
                (0, "legacy".into(), names(&[])),
                (0, "star".into(), names(&[])),
            ]
        );
    }

    #[test]
    fn strings_and_comments_are_not_imports() {
        let src = "# import in_comment\ns = 'import in_string'\nt = \"\"\"\nimport in_docstring\nfrom x import y\n\"\"\"\n\
                   u = r'\\\\' # import after_raw\nv = f\"{import_module('no')}\"\nprint('from here import nothing')\n\
                   x = 1  # from a import b\nimport real\nraise E from cause\nyield_from = 1\n";
        assert_eq!(imports(src), vec![(0, "real".into(), names(&[]))]);
    }

    #[test]
    fn literal_sys_path_changes_relative_to_the_script_are_understood() {
        let src = r#"
import os, sys
from pathlib import Path
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
sys.path.insert(0, str(Path(__file__).resolve().parent / "vendor"))
sys.path.append(str(Path(__file__).parents[1] / "third"))
sys.path.append("relative/to/cwd")
sys.path.insert(0, os.environ["SOMEWHERE"])
"#;
        let s = scan(src, Path::new("/ws/tools/gen.py"), Path::new("/ws"));
        assert_eq!(s.inserted, [PathBuf::from("/ws/lib"), PathBuf::from("/ws/tools/vendor")]);
        assert_eq!(s.appended, [PathBuf::from("/ws/third"), PathBuf::from("/ws/relative/to/cwd")]);
    }
}
