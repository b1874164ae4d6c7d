//! What a Python file imports, read statically and never run: a byte tokenizer (comments and the
//! inside of strings skipped) and a scan of its statements for imports, `import_module(…)` and
//! `__import__(…)` calls, `sys.path` changes and a literal `__all__` (docs/usage.md lists the
//! forms and values understood). What cannot be worked out is never silent: a `sys.path` change
//! or an import by a computed name is reported with its line ([`Unfollowed`]); a computed name
//! with a known package (`import_module(f".{stem}", "pkg")`) stands for every module of it.
//!
//! Bounded on any source: tokens are read one at a time over the file's bytes; a statement is held
//! up to [`STATEMENT_TOKENS`] tokens (a longer one is read in overlapping windows); brackets are
//! matched without recursion; expressions are evaluated to a depth of [`EVAL_DEPTH`] and values to
//! [`VALUE_BYTES`]; an index such as `parents[n]` is checked against the path, never counted to.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Tokens of one statement held at once; a longer statement is read in windows of this size.
const STATEMENT_TOKENS: usize = 8192;
/// Tokens a window keeps from the one before, so that a call across their border is seen whole.
const WINDOW_OVERLAP: usize = 1024;
/// Nesting an expression is evaluated to; deeper parts are skipped (their value unknown).
const EVAL_DEPTH: usize = 48;
/// The longest string or path value kept.
const VALUE_BYTES: usize = 4096;
/// The most items of a list value, names of one `from … import`, or `__all__` entries.
const LIST_ITEMS: usize = 4096;
/// Variables tracked per file.
const VARIABLES: usize = 4096;
/// `sys.path` changes and unfollowed lines kept per file.
const PER_FILE: usize = 256;

/// One import a file makes.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Import {
    /// Leading dots of a relative import (0: absolute).
    pub level: usize,
    /// The dotted module, `a.b` → `["a", "b"]` (empty for `from . import x`).
    pub module: Vec<String>,
    /// `from … import` names: each may be a submodule.
    pub names: Vec<String>,
    /// `from module import *`: the names of the package's `__all__`.
    pub star: bool,
    /// A computed name inside `module` (a package): every module of the package's directory.
    pub whole: bool,
    pub line: u32,
}

/// Where a `sys.path` change puts a directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum End {
    Front,
    Back,
}

/// What a line does that the scan cannot follow.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Unfollowed {
    /// An import by a name computed at run time, with no package to bound it.
    ComputedName,
    /// A `sys.path` change whose value cannot be worked out.
    SysPath,
    /// A statement past the scan's bounds (names of an import, a path list).
    TooLong,
}

/// A module's `__all__`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum All {
    Names(Vec<String>),
    /// Assigned a value that is not a literal list of strings.
    Computed,
}

/// What [`scan`] finds in one file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Scan {
    pub imports: Vec<Import>,
    /// `sys.path` changes, in order.
    pub path: Vec<(End, PathBuf)>,
    pub all: Option<All>,
    /// Lines whose effect on imports is not followed, in order.
    pub unfollowed: Vec<(u32, Unfollowed)>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Name,
    Str,
    Num,
    Op,
    /// The end of a logical line.
    End,
}

const RAW: u8 = 1;
const FORMAT: u8 = 2;

/// A token: a slice of the source (a string's is its body, between the quotes).
#[derive(Clone, Copy, Debug)]
struct Tok<'a> {
    kind: Kind,
    text: &'a [u8],
    line: u32,
    /// [`RAW`], [`FORMAT`] for strings.
    flags: u8,
}

impl Tok<'_> {
    fn is_op(&self, op: &str) -> bool {
        self.kind == Kind::Op && self.text == op.as_bytes()
    }

    fn is_name(&self, name: &str) -> bool {
        self.kind == Kind::Name && self.text == name.as_bytes()
    }

    fn opens(&self) -> bool {
        self.kind == Kind::Op && matches!(self.text, b"(" | b"[" | b"{")
    }

    fn closes(&self) -> bool {
        self.kind == Kind::Op && matches!(self.text, b")" | b"]" | b"}")
    }

    fn name(&self) -> Option<&str> {
        (self.kind == Kind::Name).then(|| std::str::from_utf8(self.text).ok()).flatten()
    }
}

const OPS3: [&[u8]; 5] = [b"**=", b"//=", b">>=", b"<<=", b"..."];
const OPS2: [&[u8]; 19] = [
    b"==", b"!=", b"<=", b">=", b"+=", b"-=", b"*=", b"/=", b"%=", b"&=", b"|=", b"^=", b"@=", b"->", b":=", b"**",
    b"//", b"<<", b">>",
];
/// Keywords whose statement's header ends at its `:`.
const COMPOUND: [&[u8]; 15] = [
    b"if", b"elif", b"else", b"for", b"while", b"try", b"except", b"finally", b"with", b"def", b"class", b"async",
    b"lambda", b"match", b"case",
];
/// Names whose value is known without a variable.
const KNOWN_NAMES: [&[u8]; 9] =
    [b"__file__", b"__name__", b"__package__", b"__spec__", b"getcwd", b"cwd", b"pardir", b"curdir", b"sep"];
/// Words that join two operands.
const OPERATOR_WORDS: [&[u8]; 9] = [b"and", b"or", b"not", b"is", b"in", b"if", b"else", b"for", b"async"];

/// The tokens of a source, one at a time.
struct Lexer<'a> {
    src: &'a [u8],
    i: usize,
    line: u32,
    depth: usize,
    /// Nothing since the last line end.
    fresh: bool,
    done: bool,
}

impl<'a> Lexer<'a> {
    fn new(src: &'a [u8]) -> Self {
        Self { src, i: 0, line: 1, depth: 0, fresh: true, done: false }
    }

    fn tok(&mut self, kind: Kind, start: usize, end: usize, line: u32, flags: u8) -> Tok<'a> {
        self.fresh = kind == Kind::End;
        Tok { kind, text: &self.src[start..end], line, flags }
    }

    /// The string whose opening quote is at `self.i`.
    fn string(&mut self, flags: u8) -> Tok<'a> {
        let s = self.src;
        let (at, line) = (self.i, self.line);
        let q = s[at];
        let triple = s.get(at + 1) == Some(&q) && s.get(at + 2) == Some(&q);
        let start = at + if triple { 3 } else { 1 };
        let mut j = start;
        let end = loop {
            let Some(at) = memchr::memchr3(q, b'\\', b'\n', &s[j.min(s.len())..]).map(|n| j + n) else {
                self.i = s.len();
                break s.len();
            };
            j = at;
            match s[j] {
                b'\\' => {
                    if s.get(j + 1) == Some(&b'\n') {
                        self.line += 1;
                    }
                    j += 2;
                }
                b'\n' if !triple => {
                    // Unterminated: the string ends with its line.
                    self.i = j;
                    break j;
                }
                b'\n' => {
                    self.line += 1;
                    j += 1;
                }
                _ if !triple || (s.get(j + 1) == Some(&q) && s.get(j + 2) == Some(&q)) => {
                    self.i = j + if triple { 3 } else { 1 };
                    break j;
                }
                _ => j += 1,
            }
        };
        self.tok(Kind::Str, start, end.min(s.len()), line, flags)
    }
}

fn is_name_byte(c: u8) -> bool {
    c == b'_' || c.is_ascii_alphanumeric() || c >= 0x80
}

/// The flags of a string prefix (`r`, `f`, `rb`, …), if `word` is one.
fn string_prefix(word: &[u8]) -> Option<u8> {
    if word.len() > 2 {
        return None;
    }
    let mut flags = 0;
    for c in word {
        flags |= match c.to_ascii_lowercase() {
            b'r' => RAW,
            b'f' => FORMAT,
            b'b' | b'u' => 0,
            _ => return None,
        };
    }
    Some(flags)
}

impl<'a> Iterator for Lexer<'a> {
    type Item = Tok<'a>;

    fn next(&mut self) -> Option<Tok<'a>> {
        let s = self.src;
        loop {
            let Some(&c) = s.get(self.i) else {
                if self.done {
                    return None;
                }
                self.done = true;
                return (!self.fresh).then(|| self.tok(Kind::End, s.len(), s.len(), self.line, 0));
            };
            match c {
                b'#' => self.i = memchr::memchr(b'\n', &s[self.i..]).map_or(s.len(), |n| self.i + n),
                b'\\' if s.get(self.i + 1) == Some(&b'\n') => {
                    self.i += 2;
                    self.line += 1;
                }
                b'\\' if s[self.i + 1..].starts_with(b"\r\n") => {
                    self.i += 3;
                    self.line += 1;
                }
                b'\n' => {
                    self.i += 1;
                    self.line += 1;
                    if self.depth == 0 && !self.fresh {
                        return Some(self.tok(Kind::End, self.i - 1, self.i - 1, self.line - 1, 0));
                    }
                }
                b' ' | b'\t' | b'\r' | b'\x0c' => {
                    self.i += 1;
                    while self.i < s.len() && matches!(s[self.i], b' ' | b'\t') {
                        self.i += 1;
                    }
                }
                b'"' | b'\'' => return Some(self.string(0)),
                _ if is_name_byte(c) && !c.is_ascii_digit() => {
                    let start = self.i;
                    while self.i < s.len() && is_name_byte(s[self.i]) {
                        self.i += 1;
                    }
                    let quoted = matches!(s.get(self.i), Some(b'"' | b'\''));
                    if let Some(flags) = string_prefix(&s[start..self.i]).filter(|_| quoted) {
                        return Some(self.string(flags));
                    }
                    return Some(self.tok(Kind::Name, start, self.i, self.line, 0));
                }
                _ if c.is_ascii_digit() || (c == b'.' && s.get(self.i + 1).is_some_and(u8::is_ascii_digit)) => {
                    let start = self.i;
                    while self.i < s.len() && (is_name_byte(s[self.i]) || s[self.i] == b'.') {
                        self.i += 1;
                    }
                    return Some(self.tok(Kind::Num, start, self.i, self.line, 0));
                }
                _ => {
                    let start = self.i;
                    let rest = &s[start..];
                    let len = if OPS3.iter().any(|op| rest.starts_with(op)) {
                        3
                    } else if OPS2.iter().any(|op| rest.starts_with(op)) {
                        2
                    } else {
                        1
                    };
                    self.i += len;
                    match c {
                        b'(' | b'[' | b'{' => self.depth += 1,
                        b')' | b']' | b'}' => self.depth = self.depth.saturating_sub(1),
                        _ => {}
                    }
                    return Some(self.tok(Kind::Op, start, self.i, self.line, 0));
                }
            }
        }
    }
}

/// For each token, the index of the bracket closing it (openers only), else `usize::MAX`, into
/// `close`.
fn brackets(toks: &[Tok], close: &mut Vec<usize>, open: &mut Vec<usize>) {
    close.clear();
    close.resize(toks.len(), usize::MAX);
    open.clear();
    for (j, t) in toks.iter().enumerate() {
        if t.opens() {
            open.push(j);
        } else if t.closes()
            && let Some(o) = open.pop()
        {
            close[o] = j;
        }
    }
}

/// A string literal's value (escapes decoded), when it is short enough to be a value.
fn decode(body: &[u8], raw: bool) -> Option<String> {
    if body.len() > VALUE_BYTES {
        return None;
    }
    if raw || !body.contains(&b'\\') {
        return Some(String::from_utf8_lossy(body).into_owned());
    }
    let mut out = Vec::with_capacity(body.len());
    let mut i = 0;
    while i < body.len() {
        if body[i] != b'\\' || i + 1 == body.len() {
            out.push(body[i]);
            i += 1;
            continue;
        }
        match body[i + 1] {
            b'n' => out.push(b'\n'),
            b't' => out.push(b'\t'),
            b'r' => out.push(b'\r'),
            b'\n' => {}
            c @ (b'\\' | b'\'' | b'"') => out.push(c),
            c => out.extend_from_slice(&[b'\\', c]),
        }
        i += 2;
    }
    Some(String::from_utf8_lossy(&out).into_owned())
}

/// A value an expression may have.
#[derive(Clone, Debug, PartialEq)]
enum Val {
    /// A path made from `__file__` (absolute).
    Path(PathBuf),
    /// A string (a relative path is taken relative to the workspace).
    Text(String),
    /// A string known only up to here: `f".{stem}"`, `"." + name`.
    Prefix(String),
    List(Vec<Val>),
    /// `sys.path` with lists spliced before and after it.
    SysPath {
        front: Vec<Val>,
        back: Vec<Val>,
    },
    /// `__name__`, `__package__`: the file's own package.
    OwnPackage,
}

impl Val {
    fn fits(&self) -> bool {
        match self {
            Val::Path(p) => p.as_os_str().len() <= VALUE_BYTES,
            Val::Text(t) | Val::Prefix(t) => t.len() <= VALUE_BYTES,
            Val::List(items) => items.len() <= LIST_ITEMS,
            Val::SysPath { front, back } => front.len() + back.len() <= LIST_ITEMS,
            Val::OwnPackage => true,
        }
    }

    /// The path a string names (absolute).
    fn path(&self, cwd: &Path) -> Option<PathBuf> {
        match self {
            Val::Path(p) => Some(p.clone()),
            Val::Text(t) => Some(crate::paths::normalize(&cwd.join(t))),
            _ => None,
        }
    }

    fn text(&self) -> Option<String> {
        match self {
            Val::Path(p) => Some(p.to_string_lossy().into_owned()),
            Val::Text(t) => Some(t.clone()),
            _ => None,
        }
    }

    fn parent(self) -> Option<Val> {
        Some(match self {
            Val::Path(p) => Val::Path(p.parent().map(Path::to_owned).unwrap_or(p)),
            Val::Text(t) => Val::Text(Path::new(&t).parent().map_or(String::new(), |p| p.to_string_lossy().into())),
            _ => return None,
        })
    }

    /// `os.path.join(self, rest)`, `self / rest`.
    fn join(self, rest: Val) -> Option<Val> {
        Some(match (self, rest) {
            (Val::Path(_) | Val::Text(_), Val::Path(p)) => Val::Path(p),
            (Val::Path(b), Val::Text(t)) => Val::Path(crate::paths::normalize(&b.join(t))),
            (Val::Text(b), Val::Text(t)) => Val::Text(Path::new(&b).join(t).to_string_lossy().into_owned()),
            _ => return None,
        })
    }

    /// `self + rest`; `rest` unknown leaves a prefix.
    fn plus(self, rest: Option<Val>) -> Option<Val> {
        Some(match (self, rest) {
            (Val::Path(p), Some(Val::Text(t))) => {
                Val::Path(crate::paths::normalize(Path::new(&format!("{}{t}", p.to_string_lossy()))))
            }
            (Val::Text(a), Some(Val::Text(b))) => Val::Text(a + &b),
            (Val::Text(a), Some(Val::Path(p))) => Val::Text(a + &p.to_string_lossy()),
            (Val::Text(a), Some(Val::Prefix(b))) => Val::Prefix(a + &b),
            (Val::Text(a), None) => Val::Prefix(a),
            (Val::Prefix(a), _) => Val::Prefix(a),
            (Val::List(mut a), Some(Val::List(b))) => {
                a.extend(b);
                Val::List(a)
            }
            (Val::List(mut a), Some(Val::SysPath { front, back })) => {
                a.extend(front);
                Val::SysPath { front: a, back }
            }
            (Val::SysPath { front, mut back }, Some(Val::List(b))) => {
                back.extend(b);
                Val::SysPath { front, back }
            }
            _ => return None,
        })
    }
}

/// Names bound to `sys` (`import sys as s`) and to `sys.path` (`from sys import path`).
#[derive(Debug)]
struct Aliases {
    sys: Vec<String>,
    path: Vec<String>,
}

/// Call arguments: positional values, then keyword values (`None`: unknown).
#[derive(Debug, Default)]
struct Args {
    positional: Vec<Option<Val>>,
    keywords: Vec<(String, Option<Val>)>,
}

impl Args {
    fn get(&self, index: usize, keyword: &str) -> Option<&Val> {
        match self.positional.get(index) {
            Some(v) => v.as_ref(),
            None => self.keywords.iter().find(|(k, _)| k == keyword).and_then(|(_, v)| v.as_ref()),
        }
    }
}

/// The few expressions worth understanding, over a statement's tokens; every step moves on by at
/// least one token, and nesting past [`EVAL_DEPTH`] is stepped over by its bracket.
struct Eval<'e, 'a> {
    toks: &'e [Tok<'a>],
    close: &'e [usize],
    file: &'e Path,
    cwd: &'e Path,
    vars: &'e HashMap<String, Val>,
    aliases: &'e Aliases,
}

/// An expression's value (`None`: unknown) and the index after it.
type Out = (Option<Val>, usize);

impl Eval<'_, '_> {
    fn tok(&self, i: usize, end: usize) -> Option<&Tok<'_>> {
        if i < end { self.toks.get(i) } else { None }
    }

    /// The index after the bracket group opened at `i`, or `end` when it is not closed before.
    fn after_group(&self, i: usize, end: usize) -> usize {
        match self.close[i] {
            c if c < end => c + 1,
            _ => end,
        }
    }

    /// The next `,` or closing bracket at this level, from `i`.
    fn skip_item(&self, mut i: usize, end: usize) -> usize {
        while let Some(t) = self.tok(i, end) {
            if t.opens() {
                i = self.after_group(i, end);
            } else if t.is_op(",") || t.closes() {
                return i;
            } else {
                i += 1;
            }
        }
        end
    }

    /// The value of the whole of `toks[i..end]`, when it is understood.
    fn whole(&self, i: usize, end: usize) -> Option<Val> {
        let (v, next) = self.expr(i, end, 0);
        v.filter(|_| next == end)
    }

    /// The expression at `i`, up to a `,`, `:`, `=` or closing bracket at this level.
    fn expr(&self, i: usize, end: usize, depth: usize) -> Out {
        if depth > EVAL_DEPTH {
            return (None, self.skip_item(i, end));
        }
        let (mut v, mut i) = self.operand(i, end, depth);
        let (mut pluses, mut slashes) = (false, false);
        while let Some(t) = self.tok(i, end) {
            let op = match t.kind {
                Kind::Op if t.closes() || matches!(t.text, b"," | b":" | b";" | b"->") => break,
                Kind::Op if t.text.ends_with(b"=") && !matches!(t.text, b"==" | b"!=" | b"<=" | b">=") => break,
                Kind::Op => t.text,
                Kind::Name if OPERATOR_WORDS.contains(&t.text) => t.text,
                _ => break,
            };
            let (rhs, next) = self.operand(i + 1, end, depth);
            pluses |= op == b"+";
            slashes |= op == b"/";
            v = match (op, v) {
                _ if pluses && slashes => None,
                (b"+", Some(a)) => a.plus(rhs),
                (b"/", Some(a)) => rhs.and_then(|b| a.join(b)),
                _ => None,
            };
            i = next;
        }
        (v.filter(Val::fits), i)
    }

    /// A unary operand and its attributes, calls and subscripts.
    fn operand(&self, mut i: usize, end: usize, depth: usize) -> Out {
        let mut known = true;
        while let Some(t) = self.tok(i, end) {
            let unary = (t.kind == Kind::Op && matches!(t.text, b"-" | b"+" | b"~" | b"*" | b"**"))
                || t.is_name("not")
                || t.is_name("await");
            if !unary {
                break;
            }
            known = false;
            i += 1;
        }
        if i >= end {
            return (None, end);
        }
        let (v, next) = self.primary(i, end, depth);
        let (v, next) = self.postfix(v, next, end, depth);
        (v.filter(|_| known), next)
    }

    fn primary(&self, i: usize, end: usize, depth: usize) -> Out {
        let t = self.toks[i];
        match t.kind {
            Kind::Str => {
                let mut v = self.string(&t);
                let mut j = i + 1;
                while let Some(next) = self.tok(j, end).filter(|n| n.kind == Kind::Str) {
                    v = v.and_then(|a| a.plus(self.string(next))).filter(Val::fits);
                    j += 1;
                }
                (v, j)
            }
            Kind::Name if t.is_name("lambda") => (None, self.skip_item(i, end).max(i + 1)),
            Kind::Name => {
                let mut parts = vec![t];
                let mut j = i + 1;
                while let (Some(dot), Some(n)) = (self.tok(j, end), self.tok(j + 1, end)) {
                    if !dot.is_op(".") || n.kind != Kind::Name || parts.len() >= 64 {
                        break;
                    }
                    parts.push(*n);
                    j += 2;
                }
                if self.tok(j, end).is_some_and(|t| t.is_op("(")) {
                    let (args, after) = self.args(j, end, depth);
                    return (self.call(&parts, args), after);
                }
                self.dotted(&parts, j, end)
            }
            Kind::Op if t.is_op("(") || t.is_op("[") => {
                let after = self.after_group(i, end);
                if self.close[i] >= end {
                    return (None, after);
                }
                let (items, tuple) = self.items(i + 1, self.close[i], depth + 1);
                let v = if tuple || t.is_op("[") {
                    items.into_iter().collect::<Option<Vec<_>>>().map(Val::List)
                } else {
                    items.into_iter().next().flatten()
                };
                (v, after)
            }
            Kind::Op if t.opens() => (None, self.after_group(i, end)),
            _ => (None, i + 1),
        }
    }

    /// The items of a list or tuple between `i` and its closing bracket `end`, and whether a comma
    /// was seen.
    fn items(&self, mut i: usize, end: usize, depth: usize) -> (Vec<Option<Val>>, bool) {
        let (mut items, mut comma) = (Vec::new(), false);
        while i < end {
            let (v, next) = self.expr(i, end, depth);
            i = next;
            if i < end && !self.toks[i].is_op(",") {
                // A slice, a keyword, a comprehension's tail: not a plain item.
                i = self.skip_item(i + 1, end);
                items.push(None);
            } else {
                items.push(v);
            }
            if i < end {
                comma = true;
                i += 1;
            }
            if items.len() > LIST_ITEMS {
                return (vec![None], true);
            }
        }
        (items, comma)
    }

    /// The arguments of the call whose `(` is at `open`; the index after its `)`.
    fn args(&self, open: usize, end: usize, depth: usize) -> (Option<Args>, usize) {
        let after = self.after_group(open, end);
        let close = self.close[open];
        if close >= end || depth > EVAL_DEPTH {
            return (None, after);
        }
        let mut args = Args::default();
        let mut i = open + 1;
        while i < close {
            let t = self.toks[i];
            let keyword = t.name().filter(|_| self.tok(i + 1, close).is_some_and(|n| n.is_op("=")));
            let (v, next) = match keyword {
                Some(_) => self.expr(i + 2, close, depth + 1),
                None => self.expr(i, close, depth + 1),
            };
            let starred = t.is_op("*") || t.is_op("**");
            match keyword {
                Some(k) => args.keywords.push((k.to_owned(), v)),
                None if starred => return (None, after),
                None => args.positional.push(v),
            }
            i = next;
            if i < close && !self.toks[i].is_op(",") {
                i = self.skip_item(i + 1, close);
            }
            i += 1;
            if args.positional.len() + args.keywords.len() > LIST_ITEMS {
                return (None, after);
            }
        }
        (Some(args), after)
    }

    /// Attributes, calls and subscripts after a value.
    fn postfix(&self, mut v: Option<Val>, mut i: usize, end: usize, depth: usize) -> Out {
        while let Some(t) = self.tok(i, end) {
            if t.is_op(".") {
                let Some(name) = self.tok(i + 1, end).and_then(Tok::name) else {
                    return (None, i + 1);
                };
                if self.tok(i + 2, end).is_some_and(|t| t.is_op("(")) {
                    let (args, after) = self.args(i + 2, end, depth);
                    v = v.zip(args).and_then(|(v, args)| method(v, name, args));
                    i = after;
                } else {
                    (v, i) = self.attribute(v, name, i + 2, end);
                }
            } else if t.opens() {
                // A subscript, or a call of a computed value.
                v = None;
                i = self.after_group(i, end);
            } else {
                break;
            }
        }
        (v, i)
    }

    /// `value.name` (and `value.parents[n]`), `next` the index after `name`.
    fn attribute(&self, v: Option<Val>, name: &str, next: usize, end: usize) -> Out {
        match name {
            "parent" => (v.and_then(Val::parent), next),
            "parents" if self.tok(next, end).is_some_and(|t| t.is_op("[")) => {
                let after = self.after_group(next, end);
                let index = match (self.tok(next + 1, end), self.tok(next + 2, end)) {
                    (Some(n), Some(c)) if n.kind == Kind::Num && c.is_op("]") => std::str::from_utf8(n.text).ok(),
                    _ => None,
                };
                let n = index.and_then(|n| n.replace('_', "").parse::<u64>().ok());
                (v.zip(n).and_then(|(v, n)| self.ancestor(v, n)), after)
            }
            _ => (None, next),
        }
    }

    /// `Path(v).parents[n]`: an `IndexError` past the root, so unknown.
    fn ancestor(&self, v: Val, n: u64) -> Option<Val> {
        let path = v.path(self.cwd)?;
        let n = usize::try_from(n).ok()?.checked_add(1)?;
        path.ancestors().nth(n).map(|p| Val::Path(p.to_owned()))
    }

    /// A dotted name that is not called: a variable and its attributes, `__file__`, `sys.path`.
    fn dotted(&self, parts: &[Tok], mut next: usize, end: usize) -> Out {
        let words: Vec<&str> = parts.iter().filter_map(Tok::name).collect();
        if words.len() != parts.len() {
            return (None, next);
        }
        let sys = |w: &str| self.aliases.sys.iter().any(|s| s == w);
        let fixed = match words.as_slice() {
            [s, "path"] if sys(s) => Some(Val::SysPath { front: Vec::new(), back: Vec::new() }),
            [p] if self.aliases.path.iter().any(|a| a == p) => {
                Some(Val::SysPath { front: Vec::new(), back: Vec::new() })
            }
            ["os", "pardir"] | ["os", "path", "pardir"] => Some(Val::Text("..".into())),
            ["os", "curdir"] | ["os", "path", "curdir"] => Some(Val::Text(".".into())),
            ["os", "sep"] | ["os", "path", "sep"] => Some(Val::Text("/".into())),
            _ => None,
        };
        if fixed.is_some() {
            return (fixed, next);
        }
        let mut v = match words[0] {
            "__file__" => Some(Val::Path(self.file.to_owned())),
            "__name__" | "__package__" => Some(Val::OwnPackage),
            "__spec__" if words.get(1) == Some(&"parent") => return (Some(Val::OwnPackage), next),
            w => self.vars.get(w).cloned(),
        };
        for (k, word) in words.iter().enumerate().skip(1) {
            if *word == "parents" && k + 1 == words.len() {
                return self.attribute(v, word, next, end);
            }
            v = match *word {
                "parent" => v.and_then(Val::parent),
                _ => None,
            };
        }
        next = next.min(end);
        (v, next)
    }

    /// A call of a dotted name: a method of a known value, or one of the functions understood.
    fn call(&self, parts: &[Tok], args: Option<Args>) -> Option<Val> {
        let args = args?;
        let words: Vec<&str> = parts.iter().filter_map(Tok::name).collect();
        let (last, receiver) = words.split_last()?;
        if let Some(first) = receiver.first()
            && (*first == "__file__" || self.vars.contains_key(*first))
        {
            let (v, _) = self.dotted(&parts[..parts.len() - 1], 0, 0);
            return method(v?, last, args);
        }
        let arg = |i: usize| args.positional.get(i).cloned().flatten();
        let all = || args.positional.iter().cloned().collect::<Option<Vec<Val>>>();
        let only = || (args.positional.len() == 1 && args.keywords.is_empty()).then(|| arg(0)).flatten();
        match (*last, receiver) {
            ("dirname", _) => only()?.parent(),
            ("abspath" | "realpath" | "normpath" | "fspath" | "str", _) => only(),
            ("Path" | "PurePath" | "PosixPath" | "PurePosixPath", _) => {
                let mut parts = all()?.into_iter();
                let first = parts.next()?;
                parts.try_fold(first, Val::join)
            }
            ("join", [] | [.., "path"]) => {
                let mut parts = all()?.into_iter();
                let first = parts.next()?;
                parts.try_fold(first, Val::join)
            }
            ("getenv", [] | ["os"]) | ("get", ["os", "environ"] | ["environ"]) => args.get(1, "default").cloned(),
            ("getcwd", [] | ["os"]) | ("cwd", ["Path" | "pathlib"] | ["pathlib", "Path"]) => {
                Some(Val::Path(self.cwd.to_owned()))
            }
            ("expanduser", _) => only().filter(|v| !v.text().is_some_and(|t| t.starts_with('~'))),
            _ => None,
        }
    }

    fn string(&self, t: &Tok) -> Option<Val> {
        if t.flags & FORMAT == 0 {
            return decode(t.text, t.flags & RAW != 0).map(Val::Text);
        }
        self.fstring(t.text, t.flags & RAW != 0)
    }

    /// An f-string: its text when every field is a name of known value, else its text up to the
    /// first field that is not.
    fn fstring(&self, body: &[u8], raw: bool) -> Option<Val> {
        if body.len() > VALUE_BYTES {
            return None;
        }
        let mut text = String::new();
        let mut literal = Vec::new();
        let mut i = 0;
        while i < body.len() {
            match (body[i], body.get(i + 1)) {
                (b'{', Some(b'{')) | (b'}', Some(b'}')) => {
                    literal.push(body[i]);
                    i += 2;
                }
                (b'{', _) => {
                    text.push_str(&decode(&literal, raw)?);
                    literal.clear();
                    let close = body[i..].iter().position(|c| *c == b'}').map(|p| i + p);
                    let field = close.map(|c| &body[i + 1..c]).and_then(|f| std::str::from_utf8(f).ok());
                    let value = field.and_then(|f| match f.trim() {
                        "__file__" => Some(self.file.to_string_lossy().into_owned()),
                        name => self.vars.get(name).and_then(Val::text),
                    });
                    match (value, close) {
                        (Some(v), Some(c)) => {
                            text.push_str(&v);
                            i = c + 1;
                        }
                        _ => return Some(Val::Prefix(text)),
                    }
                }
                (c, _) => {
                    literal.push(c);
                    i += 1;
                }
            }
        }
        text.push_str(&decode(&literal, raw)?);
        Some(Val::Text(text))
    }
}

/// A method of a known value.
fn method(v: Val, name: &str, args: Args) -> Option<Val> {
    match name {
        "resolve" | "absolute" | "as_posix" => Some(v),
        "expanduser" => Some(v).filter(|v| !v.text().is_some_and(|t| t.starts_with('~'))),
        "joinpath" => args.positional.into_iter().try_fold(v, |acc, part| acc.join(part?)),
        _ => None,
    }
}

/// One `import …` or `from … import …` statement, read token by token.
struct ImportStatement {
    from: bool,
    line: u32,
    level: usize,
    module: Vec<String>,
    /// `import`: the dotted name being read.
    current: Vec<String>,
    /// `from`: past `import`.
    names_part: bool,
    names: Vec<String>,
    star: bool,
    alias_next: bool,
    depth: usize,
    cut: bool,
}

impl ImportStatement {
    fn new(first: &Tok) -> Self {
        Self {
            from: first.is_name("from"),
            line: first.line,
            level: 0,
            module: Vec::new(),
            current: Vec::new(),
            names_part: false,
            names: Vec::new(),
            star: false,
            alias_next: false,
            depth: 0,
            cut: false,
        }
    }
}

/// Scans one file, statement by statement.
struct Scanner<'p> {
    file: &'p Path,
    cwd: &'p Path,
    vars: HashMap<String, Val>,
    aliases: Aliases,
    out: Scan,
    /// [`brackets`]' vectors, kept between statements.
    buffers: (Vec<usize>, Vec<usize>),
}

impl Scanner<'_> {
    fn note(&mut self, line: u32, what: Unfollowed) {
        if self.out.unfollowed.len() < PER_FILE && !self.out.unfollowed.contains(&(line, what)) {
            self.out.unfollowed.push((line, what));
        }
    }

    fn bind(&mut self, name: &str) {
        self.vars.remove(name);
    }

    fn set(&mut self, name: &str, v: Option<Val>) {
        match v {
            Some(v) if self.vars.len() < VARIABLES || self.vars.contains_key(name) => {
                self.vars.insert(name.to_owned(), v);
            }
            _ => self.bind(name),
        }
    }

    fn feed_import(&mut self, st: &mut ImportStatement, t: Tok) {
        let Some(word) = t.name() else {
            match t.text {
                b"(" => st.depth += 1,
                b")" => st.depth = st.depth.saturating_sub(1),
                b"." if st.from && st.module.is_empty() && !st.names_part => st.level += 1,
                b"..." if st.from && st.module.is_empty() && !st.names_part => st.level += 3,
                b"," if !st.from => self.finish_module(st),
                b"*" if st.names_part => st.star = true,
                _ => {}
            }
            return;
        };
        if word == "as" {
            st.alias_next = true;
        } else if st.alias_next {
            st.alias_next = false;
            self.bind(word);
            let of_sys =
                if st.from { st.module == ["sys"] && st.names.last().is_some_and(|n| n == "path") } else { false };
            if of_sys {
                self.aliases.path.push(word.to_owned());
            } else if !st.from && st.current == ["sys"] {
                self.aliases.sys.push(word.to_owned());
            }
        } else if st.from && !st.names_part {
            if word == "import" {
                st.names_part = true;
            } else if st.module.len() < 64 {
                st.module.push(word.to_owned());
            }
        } else if st.from {
            if st.names.len() >= LIST_ITEMS {
                st.cut = true;
                return;
            }
            self.bind(word);
            if st.module == ["sys"] && word == "path" {
                self.aliases.path.push(word.to_owned());
            }
            st.names.push(word.to_owned());
        } else if st.current.len() < 64 {
            if st.current.is_empty() {
                self.bind(word);
            }
            st.current.push(word.to_owned());
        }
    }

    /// `import a.b`: one module read.
    fn finish_module(&mut self, st: &mut ImportStatement) {
        if !st.current.is_empty() {
            let module = std::mem::take(&mut st.current);
            self.out.imports.push(Import {
                level: 0,
                module,
                names: Vec::new(),
                star: false,
                whole: false,
                line: st.line,
            });
        }
    }

    fn finish_import(&mut self, mut st: ImportStatement) {
        if st.cut {
            self.note(st.line, Unfollowed::TooLong);
        }
        if !st.from {
            self.finish_module(&mut st);
        } else if st.names_part {
            let (level, module, names, star, line) = (st.level, st.module, st.names, st.star, st.line);
            self.out.imports.push(Import { level, module, names, star, whole: false, line });
        }
    }

    /// A statement's tokens, or a window of a longer one (`first`: its first window), whose
    /// calls from `cutoff` on are read with the next window.
    fn statement(&mut self, toks: &[Tok], first: bool, cutoff: usize) {
        let (mut close, mut open) = std::mem::take(&mut self.buffers);
        brackets(toks, &mut close, &mut open);
        self.calls(toks, &close, cutoff);
        if first && cutoff == toks.len() {
            self.assignment(toks, &close);
        } else if first {
            self.long_assignment(toks, &close);
        }
        self.buffers = (close, open);
    }

    fn eval<'e, 'a>(&'e self, toks: &'e [Tok<'a>], close: &'e [usize]) -> Eval<'e, 'a> {
        Eval { toks, close, file: self.file, cwd: self.cwd, vars: &self.vars, aliases: &self.aliases }
    }

    /// The calls that matter, starting before `cutoff`.
    fn calls(&mut self, toks: &[Tok], close: &[usize], cutoff: usize) {
        let at = |j: usize| toks.get(j);
        let is = |j: usize, op: &str| at(j).is_some_and(|t| t.is_op(op));
        let named = |j: usize, n: &str| at(j).is_some_and(|t| t.is_name(n));
        for j in 0..cutoff {
            let t = toks[j];
            if t.kind != Kind::Name || (j > 0 && is(j - 1, ".") && !(j > 1 && named(j - 2, "importlib"))) {
                continue;
            }
            let word = t.text;
            let sys = |n: &[u8]| self.aliases.sys.iter().any(|s| s.as_bytes() == n);
            let path_alias = |n: &[u8]| self.aliases.path.iter().any(|s| s.as_bytes() == n);
            if (word == b"import_module" || word == b"__import__") && is(j + 1, "(") && !(j > 0 && named(j - 1, "def"))
            {
                self.import_call(toks, close, j + 1, word == b"import_module");
            } else if sys(word) && is(j + 1, ".") && named(j + 2, "path") && is(j + 3, ".") && is(j + 5, "(") {
                let method = at(j + 4).and_then(Tok::name).unwrap_or_default().to_owned();
                self.path_call(toks, close, j + 5, &method);
            } else if path_alias(word) && is(j + 1, ".") && is(j + 3, "(") {
                let method = at(j + 2).and_then(Tok::name).unwrap_or_default().to_owned();
                self.path_call(toks, close, j + 3, &method);
            } else if word == b"site" && is(j + 1, ".") && named(j + 2, "addsitedir") && is(j + 3, "(") {
                self.path_call(toks, close, j + 3, "append");
            } else if word == b"__all__" && is(j + 1, ".") && is(j + 3, "(") {
                let method = at(j + 2).and_then(Tok::name).unwrap_or_default();
                let (args, _) = self.eval(toks, close).args(j + 3, toks.len(), 0);
                let arg = args.and_then(|a| a.positional.into_iter().next().flatten());
                match method {
                    "extend" => self.extend_all(arg),
                    "append" => self.extend_all(arg.map(|v| Val::List(vec![v]))),
                    _ => {}
                }
            }
        }
    }

    /// `importlib.import_module(name, package)`, `__import__(name, …, fromlist)`.
    fn import_call(&mut self, toks: &[Tok], close: &[usize], open: usize, import_module: bool) {
        let line = toks[open].line;
        let (args, _) = self.eval(toks, close).args(open, toks.len(), 0);
        let Some(args) = args else { return self.note(line, Unfollowed::ComputedName) };
        let (target, package) =
            if import_module { (args.get(0, "name"), args.get(1, "package")) } else { (args.get(0, "name"), None) };
        let names = if import_module {
            Vec::new()
        } else {
            match args.get(3, "fromlist") {
                Some(Val::List(items)) => items.iter().filter_map(|v| v.text()).collect(),
                _ => Vec::new(),
            }
        };
        let (name, whole) = match target {
            Some(Val::Text(t)) => (t.clone(), false),
            // A computed name: bounded when its known start names a package.
            Some(Val::Prefix(p)) if p.trim_start_matches('.').is_empty() || p.ends_with('.') => (p.clone(), true),
            _ => return self.note(line, Unfollowed::ComputedName),
        };
        let level = name.chars().take_while(|c| *c == '.').count();
        let parts: Vec<String> = name[level..].split('.').filter(|p| !p.is_empty()).map(str::to_owned).collect();
        if parts.iter().any(|p| !p.chars().all(|c| c == '_' || c.is_alphanumeric())) {
            return self.note(line, Unfollowed::ComputedName);
        }
        if whole && level == 0 && parts.is_empty() {
            return self.note(line, Unfollowed::ComputedName);
        }
        let import = |level, module| Import { level, module, names: names.clone(), star: false, whole, line };
        if level == 0 || !import_module {
            if level == 0 {
                self.out.imports.push(import(0, parts));
            }
            return;
        }
        match package {
            // Relative to a literal package: an absolute import.
            Some(Val::Text(p)) => {
                let mut module: Vec<String> = p.split('.').filter(|s| !s.is_empty()).map(str::to_owned).collect();
                if module.len() < level - 1 {
                    return self.note(line, Unfollowed::ComputedName);
                }
                module.truncate(module.len() + 1 - level);
                module.extend(parts);
                self.out.imports.push(import(0, module));
            }
            // The file's own package.
            Some(Val::OwnPackage) | None => self.out.imports.push(import(level, parts)),
            Some(_) => self.note(line, Unfollowed::ComputedName),
        }
    }

    /// `sys.path.<method>(…)`.
    fn path_call(&mut self, toks: &[Tok], close: &[usize], open: usize, method: &str) {
        let line = toks[open].line;
        let (args, _) = self.eval(toks, close).args(open, toks.len(), 0);
        let value = |index: usize| args.as_ref().and_then(|a| a.positional.get(index).cloned().flatten());
        match method {
            "insert" => self.change(End::Front, value(1), line),
            "append" => self.change(End::Back, value(0), line),
            "extend" => self.change_list(End::Back, value(0), line),
            _ => {}
        }
    }

    fn change(&mut self, end: End, v: Option<Val>, line: u32) {
        match v.and_then(|v| v.path(self.cwd)) {
            Some(_) if self.out.path.len() >= PER_FILE => self.note(line, Unfollowed::TooLong),
            Some(p) => self.out.path.push((end, p)),
            None => self.note(line, Unfollowed::SysPath),
        }
    }

    fn change_list(&mut self, end: End, v: Option<Val>, line: u32) {
        match v {
            Some(Val::List(items)) => items.into_iter().for_each(|i| self.change(end, Some(i), line)),
            _ => self.note(line, Unfollowed::SysPath),
        }
    }

    fn extend_all(&mut self, v: Option<Val>) {
        let more: Option<Vec<String>> = match v {
            Some(Val::List(items)) => items.iter().map(|v| v.text()).collect(),
            _ => None,
        };
        self.out.all = match (self.out.all.take(), more) {
            (None, Some(names)) => Some(All::Names(names)),
            (Some(All::Names(mut names)), Some(more)) if names.len() + more.len() <= LIST_ITEMS => {
                names.extend(more);
                Some(All::Names(names))
            }
            _ => Some(All::Computed),
        };
    }

    /// `sys.path` as the target `toks[start..end]`: `Some(false)` for `sys.path` itself,
    /// `Some(true)` for `sys.path[…]`.
    fn path_target(&self, toks: &[Tok], close: &[usize], start: usize, end: usize) -> Option<bool> {
        let is_alias = |t: &Tok, names: &[String]| t.name().is_some_and(|n| names.iter().any(|a| a == n));
        let target = &toks[start..end];
        let len = match target {
            [s, d, p, ..] if is_alias(s, &self.aliases.sys) && d.is_op(".") && p.is_name("path") => 3,
            [p, ..] if is_alias(p, &self.aliases.path) => 1,
            _ => return None,
        };
        match target.get(len) {
            None => Some(false),
            Some(t) if t.is_op("[") && close[start + len] == end - 1 => Some(true),
            _ => None,
        }
    }

    /// The target `toks[start..end]` of an assignment: what its value means.
    #[allow(clippy::too_many_arguments)]
    fn assign(&mut self, toks: &[Tok], close: &[usize], start: usize, end: usize, v: Option<Val>, augmented: bool) {
        let line = toks.get(start).map_or(0, |t| t.line);
        if let Some(subscript) = self.path_target(toks, close, start, end) {
            // `sys.path = …`, `sys.path += …`, `sys.path[…] = …`.
            return match v {
                Some(Val::SysPath { front, back }) if !augmented && !subscript => {
                    self.change_list(End::Front, Some(Val::List(front)), line);
                    self.change_list(End::Back, Some(Val::List(back)), line);
                }
                Some(list @ Val::List(_)) => {
                    self.change_list(if augmented { End::Back } else { End::Front }, Some(list), line)
                }
                Some(one) if subscript => self.change(End::Front, Some(one), line),
                _ => self.note(line, Unfollowed::SysPath),
            };
        }
        match &toks[start..end] {
            [t, rest @ ..] if t.is_name("__all__") && (rest.is_empty() || rest[0].is_op(":")) => {
                if !augmented {
                    self.out.all = None;
                }
                self.extend_all(v);
            }
            [t, rest @ ..] if t.kind == Kind::Name && (rest.is_empty() || rest[0].is_op(":")) => {
                let name = t.name().unwrap_or_default().to_owned();
                if augmented {
                    self.bind(&name);
                } else {
                    self.set(&name, v);
                }
            }
            target => {
                // Unpacking and other targets: every name bound there is unknown now.
                for t in target.iter().filter(|t| t.kind == Kind::Name) {
                    if let Some(n) = t.name() {
                        self.bind(n);
                    }
                }
            }
        }
    }

    /// The `=` and augmented assignments at the statement's top level.
    fn split(toks: &[Tok], close: &[usize]) -> (Vec<usize>, Option<usize>) {
        let (mut eqs, mut augmented) = (Vec::new(), None);
        let mut j = 0;
        while j < toks.len() {
            let t = toks[j];
            if t.opens() {
                j = if close[j] == usize::MAX { toks.len() } else { close[j] + 1 };
                continue;
            }
            if t.is_op("=") {
                eqs.push(j);
            } else if t.kind == Kind::Op
                && t.text.len() >= 2
                && t.text.ends_with(b"=")
                && !matches!(t.text, b"==" | b"!=" | b"<=" | b">=" | b":=")
                && eqs.is_empty()
            {
                augmented = Some(j);
                break;
            }
            j += 1;
        }
        (eqs, augmented)
    }

    fn assignment(&mut self, toks: &[Tok], close: &[usize]) {
        match toks.first() {
            Some(t) if t.is_name("for") => {
                let end = toks.iter().position(|t| t.is_name("in")).unwrap_or(toks.len());
                for t in &toks[1..end] {
                    if let Some(n) = t.name() {
                        self.bind(n);
                    }
                }
                return;
            }
            Some(t) if t.is_name("def") || t.is_name("class") => {
                if let Some(n) = toks.get(1).and_then(Tok::name) {
                    self.bind(n);
                }
                return;
            }
            _ => {}
        }
        let (eqs, augmented) = Self::split(toks, close);
        let value = |s: &Self, from: usize| match s.may_know(&toks[from..]) {
            true => s.eval(toks, close).whole(from, toks.len()),
            false => None,
        };
        if let Some(op) = augmented {
            let v = value(self, op + 1);
            return self.assign(toks, close, 0, op, v, toks[op].is_op("+="));
        }
        let Some(&last) = eqs.last() else { return };
        let v = value(self, last + 1);
        let mut start = 0;
        for eq in eqs {
            self.assign(toks, close, start, eq, v.clone(), false);
            start = eq + 1;
        }
    }

    /// Whether the value `toks` could be worked out: it holds a string, or a name that has a
    /// meaning here (most assignments have neither, and are not evaluated).
    fn may_know(&self, toks: &[Tok]) -> bool {
        toks.iter().any(|t| match t.kind {
            Kind::Str => true,
            Kind::Name => {
                KNOWN_NAMES.contains(&t.text)
                    || self.aliases.sys.iter().chain(&self.aliases.path).any(|a| a.as_bytes() == t.text)
                    || (!self.vars.is_empty() && t.name().is_some_and(|n| self.vars.contains_key(n)))
            }
            _ => false,
        })
    }

    /// The first window of a statement too long to hold: its targets are assigned values that are
    /// not known.
    fn long_assignment(&mut self, toks: &[Tok], close: &[usize]) {
        let (eqs, augmented) = Self::split(toks, close);
        let mut start = 0;
        for end in eqs.into_iter().chain(augmented) {
            self.assign(toks, close, start, end, None, augmented == Some(end));
            start = end + 1;
        }
    }
}

/// Scan `src`, the bytes of `file`; relative paths in `sys.path` are taken relative to `cwd`
/// (the workspace, where generators run).
pub fn scan(src: &[u8], file: &Path, cwd: &Path) -> Scan {
    let mut s = Scanner {
        file,
        cwd,
        vars: HashMap::new(),
        aliases: Aliases { sys: vec!["sys".into()], path: Vec::new() },
        out: Scan::default(),
        buffers: Default::default(),
    };
    let mut stmt: Vec<Tok> = Vec::new();
    // Windows of the current statement already read (0: it fits so far).
    let mut windows = 0usize;
    let (mut depth, mut compound) = (0usize, false);
    let mut import: Option<ImportStatement> = None;
    for tok in Lexer::new(src) {
        if let Some(st) = &mut import {
            if tok.kind == Kind::End || (st.depth == 0 && tok.is_op(";")) {
                s.finish_import(import.take().expect("an import statement is being read"));
            } else {
                s.feed_import(st, tok);
            }
            continue;
        }
        let boundary = tok.kind == Kind::End || (depth == 0 && (tok.is_op(";") || (compound && tok.is_op(":"))));
        if boundary {
            s.statement(&stmt, windows == 0, stmt.len());
            stmt.clear();
            (windows, depth, compound) = (0, 0, false);
            continue;
        }
        if stmt.is_empty() && windows == 0 {
            if tok.is_name("import") || tok.is_name("from") {
                import = Some(ImportStatement::new(&tok));
                continue;
            }
            compound = tok.kind == Kind::Name && COMPOUND.contains(&tok.text);
        }
        if tok.opens() {
            depth += 1;
        } else if tok.closes() {
            depth = depth.saturating_sub(1);
        }
        stmt.push(tok);
        if stmt.len() == STATEMENT_TOKENS {
            s.statement(&stmt, windows == 0, STATEMENT_TOKENS - WINDOW_OVERLAP);
            windows += 1;
            stmt.drain(..STATEMENT_TOKENS - WINDOW_OVERLAP);
        }
    }
    if let Some(st) = import {
        s.finish_import(st);
    }
    if !stmt.is_empty() {
        s.statement(&stmt, windows == 0, stmt.len());
    }
    s.out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan_at(src: &str) -> Scan {
        scan(src.as_bytes(), Path::new("/ws/tools/gen.py"), Path::new("/ws"))
    }

    fn imports(src: &str) -> Vec<(usize, String, Vec<String>)> {
        scan_at(src).imports.into_iter().map(|i| (i.level, i.module.join("."), i.names)).collect()
    }

    fn names(n: &[&str]) -> Vec<String> {
        n.iter().map(|s| s.to_string()).collect()
    }

    fn paths(s: &Scan, end: End) -> Vec<PathBuf> {
        s.path.iter().filter(|(e, _)| *e == end).map(|(_, p)| p.clone()).collect()
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
        let star = scan_at("from star import *\nfrom . import *\n").imports;
        assert!(star.iter().all(|i| i.star), "{star:?}");
        assert_eq!(star[1].level, 1);
    }

    #[test]
    fn strings_and_comments_are_not_imports() {
        let src = "# import in_comment\ns = 'import in_string'\nt = \"\"\"\nimport in_docstring\nfrom x import y\n\"\"\"\n\
                   u = r'\\\\' # import after_raw\nv = f\"{import_module('no')}\"\nprint('from here import nothing')\n\
                   x = 1  # from a import b\nimport real\nraise E from cause\nyield_from = 1\n\
                   def import_module(name):\n    pass\n";
        assert_eq!(imports(src), vec![(0, "real".into(), names(&[]))]);
        assert!(scan_at(src).unfollowed.is_empty(), "{:?}", scan_at(src).unfollowed);
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
"#;
        let s = scan_at(src);
        assert_eq!(paths(&s, End::Front), [PathBuf::from("/ws/lib"), PathBuf::from("/ws/tools/vendor")]);
        assert_eq!(paths(&s, End::Back), [PathBuf::from("/ws/third"), PathBuf::from("/ws/relative/to/cwd")]);
        assert!(s.unfollowed.is_empty(), "{:?}", s.unfollowed);
    }

    /// The idioms of deepmd-kit's generators and their neighbours, each understood.
    #[test]
    fn each_sys_path_idiom_is_understood() {
        let cases: &[(&str, End, &str)] = &[
            ("sys.path.insert(0, os.path.abspath(os.path.dirname(__file__) + \"/..\"))", End::Front, "/ws"),
            ("sys.path.insert(0, os.path.join(os.path.dirname(__file__), \"..\", \"..\"))", End::Front, "/"),
            ("sys.path[:0] = [os.path.dirname(__file__), \"lib\"]", End::Front, "/ws/tools"),
            ("sys.path[0:0] = [str(Path(__file__).parent.parent / 'src')]", End::Front, "/ws/src"),
            ("sys.path += [os.path.join(os.path.dirname(__file__), 'more')]", End::Back, "/ws/tools/more"),
            ("sys.path.extend([os.getcwd(), 'ext'])", End::Back, "/ws"),
            ("sys.path = [os.path.dirname(__file__)] + sys.path", End::Front, "/ws/tools"),
            ("sys.path = sys.path + ['after']", End::Back, "/ws/after"),
            (
                "sys.path.insert(0, os.environ.get('GEN_ROOT', os.path.dirname(__file__) + '/../lib'))",
                End::Front,
                "/ws/lib",
            ),
            ("sys.path.insert(0, os.getenv('GEN_ROOT', 'fallback'))", End::Front, "/ws/fallback"),
            (
                "ROOT = Path(__file__).resolve().parents[1]\nsys.path.insert(0, str(ROOT / 'lib'))",
                End::Front,
                "/ws/lib",
            ),
            (
                "HERE = Path(__file__).parent\nsys.path.insert(0, str(HERE.parent.joinpath('x', 'y')))",
                End::Front,
                "/ws/x/y",
            ),
            ("HERE = os.path.dirname(__file__)\nsys.path.insert(0, f'{HERE}/sub')", End::Front, "/ws/tools/sub"),
            ("import sys as s\ns.path.insert(0, os.pardir)", End::Front, "/"),
            ("from sys import path\npath.insert(0, 'p')", End::Front, "/ws/p"),
            ("site.addsitedir(os.path.join(os.path.dirname(__file__), 'site'))", End::Back, "/ws/tools/site"),
            (
                "HERE = os.path.dirname(__file__)\nif HERE not in sys.path: sys.path.insert(0, HERE)",
                End::Front,
                "/ws/tools",
            ),
        ];
        for (src, end, want) in cases {
            let s = scan_at(&format!("import os, sys\n{src}\n"));
            assert!(s.unfollowed.is_empty(), "{src}: {:?}", s.unfollowed);
            assert_eq!(paths(&s, *end).first().map(PathBuf::as_path), Some(Path::new(want)), "{src}: {:?}", s.path);
        }
    }

    #[test]
    fn a_sys_path_change_that_cannot_be_evaluated_is_reported_with_its_line() {
        let src = "import os, sys\n\nsys.path.insert(0, os.environ['SOMEWHERE'])\nsys.path.append(compute())\n\
                   sys.path[:0] = find_dirs()\nsys.path += other\nsys.path.insert(0, str(Path(__file__).parents[99]))\n\
                   sys.path.remove('x')\n";
        let s = scan_at(src);
        assert!(s.path.is_empty(), "{:?}", s.path);
        let lines: Vec<u32> = s.unfollowed.iter().map(|(l, w)| (assert_eq!(*w, Unfollowed::SysPath), *l).1).collect();
        assert_eq!(lines, [3, 4, 5, 6, 7]);
    }

    #[test]
    fn a_computed_name_inside_a_package_covers_the_package_and_another_is_reported() {
        let src = r#"
PACKAGE_BASE = "deepmd.backend"
for module_file in Path(__file__).parent.glob("*.py"):
    module_name = f".{module_file.stem}"
    import_module(module_name, PACKAGE_BASE)
importlib.import_module("." + name, __package__)
import_module(f"plugins.{name}")
import_module(f".{name}")
m = import_module(module)
__import__(name)
x = import_module(f"prefix_{name}")
"#;
        let s = scan_at(src);
        let whole: Vec<(usize, String, u32)> =
            s.imports.iter().filter(|i| i.whole).map(|i| (i.level, i.module.join("."), i.line)).collect();
        assert_eq!(
            whole,
            [(0, "deepmd.backend".into(), 5), (1, "".into(), 6), (0, "plugins".into(), 7), (1, "".into(), 8)]
        );
        assert_eq!(
            s.unfollowed,
            [(9, Unfollowed::ComputedName), (10, Unfollowed::ComputedName), (11, Unfollowed::ComputedName)]
        );
    }

    #[test]
    fn all_is_read_when_literal() {
        let all = |src: &str| scan_at(src).all;
        assert_eq!(all("__all__ = ['a', \"b\"]\n__all__ += ['c']\n"), Some(All::Names(names(&["a", "b", "c"]))));
        assert_eq!(all("__all__: list[str] = ('a',)\n__all__.append('d')\n"), Some(All::Names(names(&["a", "d"]))));
        assert_eq!(all("__all__ = [n for n in dir() if n[0] != '_']\n"), Some(All::Computed));
        assert_eq!(all("__all__ = ['a']\n__all__.extend(more)\n"), Some(All::Computed));
        assert_eq!(all("x = 1\n"), None);
    }

    /// Hostile shapes end quickly: deep nesting (no recursion on it), a huge index (checked, not
    /// counted to), a long statement, a long chain of path arithmetic.
    #[test]
    fn hostile_sources_are_bounded() {
        let deep = format!("import os\nx = {}1{}\nimport after\n", "(".repeat(20_000), ")".repeat(20_000));
        assert_eq!(imports(&deep)[1].1, "after");
        let unclosed = format!("x = {}\nimport never\n", "([{".repeat(10_000));
        scan_at(&unclosed);
        let calls = format!("sys.path.insert(0, {}'a'{})\n", "os.path.join(".repeat(5_000), ")".repeat(5_000));
        assert_eq!(scan_at(&calls).unfollowed, [(1, Unfollowed::SysPath)]);
        let index = "import sys\nfrom pathlib import Path\nROOT = Path(__file__).parents[18446744073709551615]\n\
                     sys.path.insert(0, str(ROOT))\n";
        assert_eq!(scan_at(index).unfollowed, [(4, Unfollowed::SysPath)]);
        let params: String = (0..80_000).map(|i| format!("a{i}: int = 1, ")).collect();
        let def = format!("def f({params}):\n    import inside\nsys.path.insert(0, 'ok')\n");
        let s = scan_at(&def);
        assert_eq!(s.imports.len(), 1);
        assert_eq!(s.path.len(), 1);
        let chain = format!("a = Path(__file__)\n{}sys.path.insert(0, str(a))\n", "a = a / \"x\"\n".repeat(80_000));
        assert_eq!(scan_at(&chain).unfollowed, [(80_002, Unfollowed::SysPath)]);
        let names: String = (0..10_000).map(|i| format!("n{i}, ")).collect();
        let long = format!("from pkg import ({names})\n");
        let s = scan_at(&long);
        assert_eq!((s.imports[0].names.len(), s.unfollowed.as_slice()), (LIST_ITEMS, &[(1, Unfollowed::TooLong)][..]));
        let ones = "1, ".repeat(20_000);
        let windowed = format!("x = [{ones}import_module('in.window'), {ones}]\nimport_module('next')\n");
        let found: Vec<String> = scan_at(&windowed).imports.iter().map(|i| i.module.join(".")).collect();
        assert_eq!(found, ["in.window", "next"]);
    }

    #[test]
    fn tokens_hold_no_copy_of_the_source() {
        assert!(std::mem::size_of::<Tok>() <= 40);
    }
}
