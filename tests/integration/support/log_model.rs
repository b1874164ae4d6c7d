//! A model of how the GitHub Actions runner reads a step's output, for tests of what the
//! binary prints: the integration tests and the `runner` module's unit tests use it.
//!
//! The runner reads the output line by line (.NET `StreamReader.ReadLine`: a line ends at `\n`,
//! `\r` or `\r\n`) and tries each line as a workflow command: v2 first (`::name k=v,…::data`
//! once leading whitespace is trimmed), then v1 (`##[name k=v;…]data` anywhere in the line).
//! After `::stop-commands::<token>` every command is ignored (shown as text) until a line
//! `::<token>::`. The runner obeys only the commands it knows; the model treats every name as
//! known, so it obeys more than the runner would, never less.

/// One line as the runner takes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Line {
    /// A command the runner obeys (`stop-commands` and the resuming token included).
    Command(Command),
    /// Shown as it is: not a command, or a command while commands are stopped.
    Text(String),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Command {
    pub name: String,
    pub properties: Vec<(String, String)>,
    pub data: String,
}

/// Every line of `output` as the runner takes it.
pub fn read(output: &str) -> Vec<Line> {
    let mut stopped: Option<String> = None;
    let mut out = Vec::new();
    for line in read_lines(output) {
        let parsed = parse_v2(line).or_else(|| parse_v1(line));
        let line = match (parsed, &stopped) {
            (None, _) => Line::Text(line.to_owned()),
            (Some(c), Some(token)) if c.name.eq_ignore_ascii_case(token) => {
                stopped = None;
                Line::Command(c)
            }
            (Some(_), Some(_)) => Line::Text(line.to_owned()),
            (Some(c), None) => {
                if c.name == "stop-commands" {
                    stopped = Some(c.data.clone());
                }
                Line::Command(c)
            }
        };
        out.push(line);
    }
    out
}

/// The commands the runner obeys in `output`, without the `stop-commands` pairs; panics if
/// commands are left stopped at the end (the rest of the step's output would be ignored).
pub fn commands(output: &str) -> Vec<Command> {
    let lines = read(output);
    let mut tokens = Vec::new();
    let mut out = Vec::new();
    for line in lines {
        let Line::Command(c) = line else { continue };
        if c.name == "stop-commands" {
            tokens.push(c.data.clone());
        } else if tokens.last().is_some_and(|t| t.eq_ignore_ascii_case(&c.name)) {
            tokens.pop();
        } else {
            out.push(c);
        }
    }
    assert!(tokens.is_empty(), "commands stay stopped at the end of the output:\n{output}");
    out
}

/// The text lines a reader of the log sees (commands left out).
pub fn text(output: &str) -> Vec<String> {
    read(output)
        .into_iter()
        .filter_map(|l| match l {
            Line::Text(t) => Some(t),
            Line::Command(_) => None,
        })
        .collect()
}

/// The lines of `output` as `StreamReader.ReadLine` returns them (written apart from the
/// runner module's own splitter, so that one checks the other).
pub fn read_lines(output: &str) -> Vec<&str> {
    let bytes = output.as_bytes();
    let (mut lines, mut start, mut i) = (Vec::new(), 0, 0);
    while i < bytes.len() {
        match bytes[i] {
            b'\n' => {
                lines.push(&output[start..i]);
                start = i + 1;
            }
            b'\r' => {
                lines.push(&output[start..i]);
                if bytes.get(i + 1) == Some(&b'\n') {
                    i += 1;
                }
                start = i + 1;
            }
            _ => {}
        }
        i += 1;
    }
    if start < bytes.len() {
        lines.push(&output[start..]);
    }
    lines
}

fn parse_v2(line: &str) -> Option<Command> {
    let message = line.trim_start();
    let rest = message.strip_prefix("::")?;
    let end = rest.find("::")?;
    let (info, data) = (&rest[..end], &rest[end + 2..]);
    let (name, props) = info.split_once(' ').unwrap_or((info, ""));
    if name.is_empty() {
        return None;
    }
    Some(Command {
        name: name.to_owned(),
        properties: properties(props, ',', unescape_property),
        data: unescape_data(data),
    })
}

fn parse_v1(line: &str) -> Option<Command> {
    let start = line.find("##[")? + 3;
    let end = start + line[start..].find(']')?;
    let info = &line[start..end];
    let (name, props) = info.split_once(' ').unwrap_or((info, ""));
    if name.is_empty() {
        return None;
    }
    Some(Command {
        name: name.to_owned(),
        properties: properties(props, ';', unescape_v1),
        data: line[end + 1..].to_owned(),
    })
}

fn properties(text: &str, separator: char, unescape: fn(&str) -> String) -> Vec<(String, String)> {
    text.split(separator)
        .filter(|p| !p.is_empty())
        .filter_map(|p| p.split_once('='))
        .map(|(k, v)| (k.to_owned(), unescape(v)))
        .collect()
}

fn unescape_data(s: &str) -> String {
    s.replace("%0D", "\r").replace("%0A", "\n").replace("%25", "%")
}

fn unescape_property(s: &str) -> String {
    s.replace("%0D", "\r").replace("%0A", "\n").replace("%3A", ":").replace("%2C", ",").replace("%25", "%")
}

fn unescape_v1(s: &str) -> String {
    s.replace("%3B", ";").replace("%0D", "\r").replace("%0A", "\n").replace("%5D", "]").replace("%25", "%")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn command(name: &str, properties: &[(&str, &str)], data: &str) -> Command {
        let properties = properties.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        Command { name: name.into(), properties, data: data.into() }
    }

    #[test]
    fn reads_like_the_runner() {
        let out = "plain\r::error title=x::y%0Az\n  ::add-mask::m\r\nsee ##[set-output name=a;]b\n::stop-commands::T1\n\
                   ::error::ignored\n##[warning]ignored\n::t1::\n::endgroup::\n";
        assert_eq!(
            commands(out),
            [
                command("error", &[("title", "x")], "y\nz"),
                command("add-mask", &[], "m"),
                command("set-output", &[("name", "a")], "b"),
                command("endgroup", &[], ""),
            ]
        );
        assert_eq!(text(out), ["plain", "::error::ignored", "##[warning]ignored"]);
        assert_eq!(read_lines("a\rb\r\n\nc"), ["a", "b", "", "c"]);
    }
}
