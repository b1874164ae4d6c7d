//! Guarantee 6 of docs/design.md as a property: whatever the roots, whatever the workspace
//! already holds (links out of it included) and whatever a valid archive holds (links chained
//! across overlapping roots included), a restore never creates, changes or removes anything
//! outside its roots, never leaves a link leading out of them, and a refused restore changes
//! nothing at all. `exact_cache_fuzz_oracle::check_placement` makes each case and judges it; the
//! `placement` fuzz target drives the same code with libFuzzer (fuzz/README.md).
//!
//! Reproduce one case: `PLACEMENT_SEED=<seed> PLACEMENT_CASE=<n> cargo test --test
//! integration placement_property`; `PLACEMENT_CASES=<count>` runs more. A failing case's bytes are also
//! written under the test's target tmp directory, for `cargo +nightly fuzz run placement <file>`.

use exact_cache_fuzz_oracle::{PlacementCase, PlacementOutcome, Shape, check_placement, placement_input};

const SEED: u64 = 0x6578_6163_7406;
const CASES: u64 = 300;

fn env_u64(name: &str) -> Option<u64> {
    let value = std::env::var(name).ok()?;
    let parsed = match value.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => value.parse(),
    };
    Some(parsed.unwrap_or_else(|_| panic!("{name}={value} is not a number")))
}

fn link(target: &str) -> Shape {
    Shape::Link(target.to_owned())
}

fn file() -> Shape {
    Shape::File(0o644)
}

/// The shapes that motivated the property, written out.
fn known_escapes() -> Vec<(&'static str, PlacementCase)> {
    let case = PlacementCase::new;
    vec![
        (
            "a link already in the target: `out/sub -> ../../outside`, entry `0/sub/x`",
            case(&["out"], vec![("out/sub", link("../../outside"))], vec![(0, "sub/x", file())]),
        ),
        (
            "overlapping roots `out` and `out/r`: `0/r/a -> .`, `1/a/a/a/l -> ../../..`, `1/l/victim.txt`",
            case(
                &["out", "out/r"],
                vec![],
                vec![(0, "r/a", link(".")), (1, "a/a/a/l", link("../../..")), (1, "l/victim.txt", file())],
            ),
        ),
        (
            "globs `**/*.pth` and `**/*.pt2`: `0/a.pth -> .`, `1/a.pth/a.pth/l.pt2 -> ../..`, `1/l.pt2/victim.txt`",
            case(
                &["**/*.pth", "**/*.pt2"],
                vec![],
                vec![(0, "a.pth", link(".")), (1, "a.pth/a.pth/l.pt2", link("../..")), (1, "l.pt2/victim.txt", file())],
            ),
        ),
        (
            "a link already in the target replaced through: `out/r/outside -> ../../..`, entry `0/outside/outside`",
            case(&["out/r"], vec![("out/r/outside", link("../../.."))], vec![(0, "outside/outside", link("."))]),
        ),
    ]
}

/// The two ways a restore breaks guarantee 6, told apart in the report: it wrote (or removed)
/// outside the roots, or it left a link that leads out of them.
fn kinds(broken: &[String]) -> (bool, bool) {
    let link = |b: &String| b.starts_with("restored link");
    (broken.iter().any(|b| !link(b)), broken.iter().any(link))
}

/// A smaller case that still breaks the promise `keeps` looks for: drop pre-existing paths,
/// entries and unused roots one at a time while it still fails.
fn shrink(case: &PlacementCase, keeps: &dyn Fn(&[String]) -> bool) -> PlacementCase {
    let mut best = case.clone();
    'smaller: loop {
        let mut candidates = Vec::new();
        for i in 0..best.existing.len() {
            let mut c = best.clone();
            c.existing.remove(i);
            candidates.push(c);
        }
        for i in 0..best.entries.len() {
            let mut c = best.clone();
            c.entries.remove(i);
            candidates.push(c);
        }
        for r in (0..best.roots.len()).filter(|r| best.roots.len() > 1 && best.entries.iter().all(|e| e.0 != *r)) {
            let mut c = best.clone();
            c.roots.remove(r);
            c.entries.iter_mut().filter(|e| e.0 > r).for_each(|e| e.0 -= 1);
            candidates.push(c);
        }
        for c in candidates {
            if keeps(&check_placement(&c).broken) {
                best = c;
                continue 'smaller;
            }
        }
        return best;
    }
}

/// The known escapes and `PLACEMENT_CASES` (default 300) generated cases of a fixed seed; each
/// failure names its seed and case number, and the first of each kind is shrunk.
///
/// Fails on code that follows links while placing (writes and removals through a link already in
/// the target, or through one another root or entry just placed), and on a link check that
/// measures a glob entry's target from the glob's base rather than from its match: a glob declares
/// its matches, so `0/a.pth -> .` under `**/*.pth` is a link out of the declared paths.
#[test]
#[ignore = "slow: a property test over many generated trees"]
fn restore_never_touches_anything_outside_its_roots() {
    let seed = env_u64("PLACEMENT_SEED").unwrap_or(SEED);
    let only = env_u64("PLACEMENT_CASE");
    let count = env_u64("PLACEMENT_CASES").unwrap_or(CASES);
    let mut report = Vec::new();
    if only.is_none() {
        for (name, case) in known_escapes() {
            let verdict = check_placement(&case);
            if !verdict.broken.is_empty() {
                report.push(format!("known escape: {name}\n{case}{verdict}"));
            }
        }
    }
    let known_failures = report.len();
    let (mut restored, mut refused_unpack, mut refused_commit) = (0, 0, 0);
    let (mut wrote, mut linked, mut failing) = (Vec::new(), Vec::new(), Vec::new());
    let started = std::time::Instant::now();
    let cases: Vec<u64> = only.map_or_else(|| (0..count).collect(), |n| vec![n]);
    for &n in &cases {
        let input = placement_input(seed, n);
        let case = PlacementCase::decode(&input);
        let verdict = check_placement(&case);
        match &verdict.outcome {
            PlacementOutcome::Restored => restored += 1,
            PlacementOutcome::Refused { at: "unpack", .. } => refused_unpack += 1,
            PlacementOutcome::Refused { .. } => refused_commit += 1,
        }
        let (writes, links) = kinds(&verdict.broken);
        if writes {
            wrote.push(n);
        }
        if links {
            linked.push(n);
        }
        if writes || links {
            let file = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("placement-{seed:#x}-{n}"));
            let saved =
                std::fs::write(&file, &input).map_or(String::new(), |()| format!(" (input: {})", file.display()));
            failing.push((n, case, format!("seed {seed:#x} case {n}{saved}\n")));
        }
    }
    let per_case = started.elapsed() / cases.len().max(1) as u32;
    let summary = format!(
        "{} generated cases (seed {seed:#x}), {per_case:?} each: {restored} restored, {refused_unpack} refused by the \
         verifier, {refused_commit} undone at commit; wrote outside the roots: cases {wrote:?}; left a link leading \
         out of the roots: cases {linked:?}; {known_failures} of {} known escapes broke the guarantee",
        cases.len(),
        known_escapes().len(),
    );
    eprintln!("{summary}");
    if report.is_empty() && failing.is_empty() {
        return;
    }
    // The first failing case of each kind, shrunk.
    for (kind, list, keeps) in [
        ("wrote outside the roots", &wrote, &(|b: &[String]| kinds(b).0) as &dyn Fn(&[String]) -> bool),
        ("left a link leading out of the roots", &linked, &|b: &[String]| kinds(b).1),
    ] {
        let Some(first) = list.first() else { continue };
        let (_, case, label) = failing.iter().find(|(n, ..)| n == first).expect("a failing case");
        let small = shrink(case, keeps);
        report.push(format!("first case that {kind}: {label}{case}shrunk to:\n{small}{}", check_placement(&small)));
    }
    panic!("guarantee 6 broken. {summary}\n\n{}", report.join("\n"));
}

/// The generated cases must mostly get past the verifier, or the property only tests the
/// verifier; and every case survives an encode/decode round trip (seeds are written as cases).
#[test]
fn generated_cases_reach_placement_and_round_trip() {
    let mut placed = 0;
    for n in 0..200 {
        let case = PlacementCase::decode(&placement_input(SEED, n));
        assert_eq!(PlacementCase::decode(&case.encode()), case, "case {n}");
        if n < 50 && !matches!(check_placement(&case).outcome, PlacementOutcome::Refused { at: "unpack", .. }) {
            placed += 1;
        }
    }
    assert!(placed >= 35, "only {placed} of 50 generated archives got past the verifier");
    for (name, case) in known_escapes() {
        assert_eq!(PlacementCase::decode(&case.encode()), case, "{name}");
    }
}
