//! A listing's words: its heading, its table (the command's output on the command line, log
//! lines in a job) and the generation time of its entries.

use super::super::prune::Refs;
use super::Said;
use crate::config::DEFAULT_PREFIX;
use crate::keys::Key;
use crate::outcome::ListedEntry;
use crate::runner::{Mode, Runner};
use crate::units;
use std::time::Duration;

/// `on `refs/heads/main``, `on every ref`.
pub fn refs(refs: &Refs) -> String {
    match refs {
        Refs::One(one) if one.is_empty() => "saved without a ref".to_owned(),
        Refs::One(one) => format!("on `{one}`"),
        Refs::Each => "on every ref".to_owned(),
        Refs::All => "on all refs, as one".to_owned(),
    }
}

/// `2 entries of `models` on every ref in local directory `…``.
pub fn heading(prefix: &str, on: &Refs, count: usize, store: &str) -> Said {
    let default = if prefix == DEFAULT_PREFIX { " (the default prefix; `--prefix` names another)" } else { "" };
    Said::Info(format!("{} of `{prefix}`{default} {} in {store}", units::count_of(count, "entry"), refs(on)))
}

/// The entries as a table (or that there are none), then their generation time.
pub fn listing(
    runner: &Runner,
    (prefix, on, store): (&str, &Refs, &str),
    entries: &[ListedEntry],
    long: bool,
    json: bool,
) {
    let lines = match entries.is_empty() {
        true => vec![format!("no entries of `{prefix}` {} in {store}", refs(on))],
        false => table(entries, long),
    };
    match runner.mode() {
        Mode::Cli if !json => runner.set_document(lines.join("\n")),
        Mode::Cli => {}
        Mode::Actions => lines.iter().for_each(|line| runner.info(&format!("  {line}"))),
    }
    let figures: Vec<Option<f64>> = entries.iter().map(|e| e.generation_seconds).collect();
    let uses = entries.iter().any(|e| e.last_used.is_some());
    runner.info(&format!("total generation time: {}", totals(prefix, &figures, uses)));
}

/// `<prefix>-<first 12 hex>…` (and a later generation's `.g<n>`), as `git` shortens commits.
fn short_key(key: &Key) -> String {
    let Some(prefix) = key.prefix() else { return key.to_string() };
    let rest = &key[prefix.len() + 1..];
    let generation = rest.find('.').map_or("", |i| &rest[i..]);
    format!("{prefix}-{}…{generation}", &rest[..12])
}

/// A header, then one aligned row per entry: the key's digest cut to 12 digits unless `long`,
/// the version cut to 12 digits, `-` for what is not known.
fn table(entries: &[ListedEntry], long: bool) -> Vec<String> {
    let header = ["key", "size", "created", "used", "ref", "version", "generated in", "slot", "in packs"];
    let or_dash = |value: Option<&str>| value.filter(|v| !v.is_empty()).unwrap_or("-").to_owned();
    // The packs' column only where an entry's files are in packs.
    let columns = if entries.iter().any(|e| e.packs.is_some()) { header.len() } else { header.len() - 1 };
    let rows: Vec<Vec<String>> = std::iter::once(header.map(str::to_owned))
        .chain(entries.iter().map(|e| {
            let packs = e.packs.map_or_else(
                || "-".to_owned(),
                |p| format!("{} own, {} shared", units::bytes(p.own_bytes), units::bytes(p.shared_bytes)),
            );
            [
                if long { e.key.to_string() } else { short_key(&e.key) },
                units::bytes(e.size),
                e.created.clone(),
                or_dash(e.last_used.as_deref()),
                or_dash(e.r#ref.as_deref()),
                e.version.chars().take(12).collect(),
                match e.generation_seconds {
                    Some(s) => units::duration(Duration::from_secs_f64(s)),
                    None if !e.generation_read => "not read".to_owned(),
                    None => "not recorded".to_owned(),
                },
                e.slot.map_or_else(|| "-".to_owned(), |slot| slot.to_string()),
                packs,
            ]
        }))
        .map(|row| row.into_iter().take(columns).collect())
        .collect();
    let widths: Vec<usize> =
        (0..columns).map(|i| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0)).collect();
    rows.iter()
        .map(|row| {
            let cells: Vec<String> = row.iter().zip(&widths).map(|(c, w)| format!("{c:<w$}")).collect();
            cells.join("  ").trim_end().to_owned()
        })
        .collect()
}

/// A prefix's recorded generation time, over the entries that have one.
fn totals(prefix: &str, figures: &[Option<f64>], uses_recorded: bool) -> String {
    let recorded: Vec<f64> = figures.iter().flatten().copied().collect();
    let total = Duration::from_secs_f64(recorded.iter().sum::<f64>());
    let missing = figures.len() - recorded.len();
    let not = if missing > 0 {
        format!(" ({} not recorded or not read)", units::count_of(missing, "entry"))
    } else {
        String::new()
    };
    let uses = if uses_recorded {
        "; the store records each entry's last use (`used`): a hit whose job skips its generator saves up to its \
         entry's figure (a compile cache's hit: what torch reports at the save)"
    } else {
        "; the store does not record uses"
    };
    format!(
        "`{prefix}`: {} to generate the {} with a recorded figure{not}{uses}",
        units::duration(total),
        units::count_of(recorded.len(), "entry")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(key: &str) -> ListedEntry {
        ListedEntry {
            slot: None,
            created: "2026-12-01T10:00:00Z".into(),
            last_used: None,
            key: key.into(),
            size: 2048,
            r#ref: Some(String::new()),
            version: "f".repeat(64).into(),
            generation_seconds: None,
            generation_read: true,
            packs: None,
        }
    }

    #[test]
    fn the_table_shows_short_keys_unless_long() {
        let key = format!("fixtures-{}", "0123456789ab".repeat(5) + "cdef");
        let entries = [entry(&key), entry(&format!("{key}.g2")), entry("someone-elses")];
        let short = table(&entries, false);
        assert_eq!(
            short[0].split_whitespace().collect::<Vec<_>>(),
            ["key", "size", "created", "used", "ref", "version", "generated", "in", "slot"]
        );
        assert!(short[1].starts_with("fixtures-0123456789ab…  "), "{short:?}");
        assert!(short[2].starts_with("fixtures-0123456789ab….g2  "), "{short:?}");
        assert!(short[3].starts_with("someone-elses  "), "{short:?}");
        assert!(short.iter().all(|l| l.chars().count() < 110), "{short:?}");
        let long = table(&entries, true);
        assert!(long[1].starts_with(&format!("{key}  ")), "{long:?}");
    }

    #[test]
    fn the_totals_count_the_entries_with_a_figure() {
        assert_eq!(
            totals("models", &[Some(60.0), None, Some(30.5)], true),
            "`models`: 1 min 30 s to generate the 2 entries with a recorded figure (1 entry not recorded or not \
             read); the store records each entry's last use (`used`): a hit whose job skips its generator saves up \
             to its entry's figure (a compile cache's hit: what torch reports at the save)"
        );
    }
}
