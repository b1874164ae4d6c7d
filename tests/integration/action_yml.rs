//! The `action.yml` files and the reference's tables are rendered from the input registry
//! (`src/config/defs.rs`) and the output table (`src/config/outputs.rs`), so the binary, the
//! action and its documentation cannot drift apart. This test renders them and compares with the
//! committed files (`UPDATE_ACTION_YML=1` rewrites them), checks that they parse as the runner
//! will read them, and that docs/inputs.md documents every input and output and which entry point
//! takes which input, and docs/keys.md the native facets as `src/fingerprint/facets/` defines
//! them.

use exact_cache::config::{EntryPoint, INPUTS, InputKind, OUTPUTS};
use exact_cache::fingerprint::Facet;
use std::path::Path;

/// The post step runs after every job and decides from `job-status` whether to save, so that a
/// failed job leaves a line saying why nothing was saved.
const POST_IF: &str = "always()";

fn quote(s: &str) -> String {
    serde_json::to_string(s).unwrap()
}

fn render(entry: EntryPoint) -> String {
    let (name, description, script) = match entry {
        EntryPoint::Root => (
            "exact-cache",
            "Cache generated CI artifacts (fixtures, TorchInductor/Triton caches, native builds) and reuse them only under an exact fingerprint of the environment that made them. Restores here, saves in the post step on a miss.",
            "main",
        ),
        EntryPoint::Restore => (
            "exact-cache/restore",
            "Restore an exact-cache entry (the building block for composite actions); save with exact-cache/save.",
            "restore",
        ),
        EntryPoint::Save => (
            "exact-cache/save",
            "Save an exact-cache entry, under the key from exact-cache/restore or a fresh fingerprint.",
            "save",
        ),
        EntryPoint::Fingerprint => {
            ("exact-cache/fingerprint", "Compute the exact-cache key and fingerprint file; no network.", "fingerprint")
        }
    };
    let dist = if entry == EntryPoint::Root { "dist" } else { "../dist" };
    let mut y = String::new();
    y.push_str(
        "# Generated from the input registry (src/config/defs.rs) and OUTPUTS by tests/integration/action_yml.rs:\n",
    );
    y.push_str("# edit them, then run `UPDATE_ACTION_YML=1 cargo test --test integration action_yml`.\n");
    y.push_str(&format!(
        "name: {}\ndescription: {}\nauthor: exact-cache developers\n",
        quote(name),
        quote(description)
    ));
    y.push_str("branding:\n  icon: lock\n  color: green\ninputs:\n");
    for spec in INPUTS.iter().filter(|s| s.declared_by(entry)) {
        // Every input is optional to the runner: `path` is required unless `preset` is set, which
        // the action checks itself (and says in `path`'s description).
        y.push_str(&format!("  {}:\n    description: {}\n    required: false\n", spec.name, quote(spec.description)));
        if !spec.default.is_empty() || spec.kind == InputKind::Bool {
            y.push_str(&format!("    default: {}\n", quote(spec.default)));
        }
    }
    y.push_str("outputs:\n");
    for spec in OUTPUTS.iter().filter(|o| o.entries.contains(&entry)) {
        y.push_str(&format!("  {}:\n    description: {}\n", spec.name(), quote(spec.description)));
    }
    y.push_str(&format!("runs:\n  using: node24\n  main: {dist}/{script}.js\n"));
    if entry == EntryPoint::Root {
        y.push_str(&format!("  post: {dist}/post.js\n  post-if: {}\n", quote(POST_IF)));
    }
    y
}

fn action_yml(entry: EntryPoint) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(entry.dir()).join("action.yml")
}

#[test]
fn action_yml_files_match_the_input_and_output_tables() {
    let update = std::env::var("UPDATE_ACTION_YML").is_ok_and(|v| v == "1");
    for entry in EntryPoint::ALL {
        let path = action_yml(entry);
        let expected = render(entry);
        if update {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, &expected).unwrap();
        }
        let actual = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            actual == expected,
            "{} is stale: run `UPDATE_ACTION_YML=1 cargo test --test integration action_yml`",
            path.display()
        );
    }
}

#[test]
fn action_yml_files_parse_as_the_runner_reads_them() {
    for entry in EntryPoint::ALL {
        let path = action_yml(entry);
        let yaml: serde_yaml_ng::Value = serde_yaml_ng::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(yaml["runs"]["using"].as_str(), Some("node24"), "{}", path.display());
        let main = yaml["runs"]["main"].as_str().unwrap();
        assert!(path.parent().unwrap().join(main).exists(), "{}: {main} exists", path.display());
        let inputs = yaml["inputs"].as_mapping().unwrap();
        assert!(!inputs.is_empty());
        for (name, input) in inputs {
            let description = input["description"].as_str().unwrap_or_default();
            assert!(!description.is_empty(), "{name:?} has a description");
            // The runner (and act) refuse an expression anywhere but in a default.
            assert!(!description.contains("${{"), "{name:?}'s description holds an expression");
        }
        for (name, output) in yaml["outputs"].as_mapping().unwrap() {
            assert!(output["description"].as_str().is_some_and(|d| !d.is_empty()), "{name:?} has a description");
        }
        if entry == EntryPoint::Root {
            assert_eq!(yaml["runs"]["post-if"].as_str(), Some(POST_IF));
            assert!(inputs.contains_key("save-on-failure"));
            assert_eq!(inputs["job-status"]["default"].as_str(), Some("${{ job.status }}"));
        }
    }
}

/// Where the generated tables live.
const INPUTS_PAGE: &str = "docs/inputs.md";
const KEYS_PAGE: &str = "docs/keys.md";

fn page(name: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(name)).unwrap()
}

/// A page's text from `heading` to the next `## ` heading.
fn page_section<'a>(text: &'a str, heading: &str) -> &'a str {
    let start = text.find(&format!("\n{heading}\n")).unwrap_or_else(|| panic!("the page has no `{heading}`"));
    let rest = &text[start + 1..];
    let end = rest[heading.len()..].find("\n## ").map_or(rest.len(), |i| i + heading.len());
    &rest[..end]
}

#[test]
fn the_reference_documents_every_input_and_output() {
    let text = page(INPUTS_PAGE);
    let inputs = page_section(&text, "## Inputs");
    for name in INPUTS.iter().map(|i| i.name) {
        assert!(inputs.contains(&format!("| `{name}` |")), "{INPUTS_PAGE}'s Inputs have no table row for `{name}`");
    }
    let outputs = page_section(&text, "## Outputs");
    for name in OUTPUTS.iter().map(|o| o.name()) {
        assert!(outputs.contains(&format!("| `{name}` |")), "{INPUTS_PAGE}'s Outputs have no table row for `{name}`");
    }
}

/// Replace `file`'s text between `<!-- {marker}: … -->` and `<!-- /{marker} -->` with
/// `expected` under `UPDATE_ACTION_YML=1`; otherwise check that it is `expected`.
fn check_generated_part(file: &str, marker: &str, expected: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(file);
    let text = page(file);
    let begin_marker = format!("<!-- {marker}: generated by tests/integration/action_yml.rs -->\n");
    let end_marker = format!("<!-- /{marker} -->\n");
    let begin =
        text.find(&begin_marker).unwrap_or_else(|| panic!("{file} has the `{marker}` markers")) + begin_marker.len();
    let end = begin + text[begin..].find(&end_marker).unwrap_or_else(|| panic!("the `{marker}` part ends"));
    if std::env::var("UPDATE_ACTION_YML").is_ok_and(|v| v == "1") {
        std::fs::write(&path, format!("{}{expected}{}", &text[..begin], &text[end..])).unwrap();
        return;
    }
    assert!(
        text[begin..end] == *expected,
        "{file}'s `{marker}` part is stale: run `UPDATE_ACTION_YML=1 cargo test --test integration action_yml`"
    );
}

/// Which entry point takes which input, as `EntryPoint::takes` decides.
fn render_entry_table() -> String {
    let mut t = String::from("| input | root | `restore` | `save` | `fingerprint` |\n|---|:-:|:-:|:-:|:-:|\n");
    for spec in INPUTS.iter() {
        t.push_str(&format!("| `{}` |", spec.name));
        for entry in EntryPoint::ALL {
            t.push_str(if spec.declared_by(entry) { " ✓ |" } else { " |" });
        }
        t.push('\n');
    }
    t
}

/// Every input with its default and its description, as `action.yml` has them.
fn render_input_table() -> String {
    let mut t = String::from("| input | default | meaning |\n|---|---|---|\n");
    for spec in INPUTS.iter() {
        let default = match (spec.name, spec.computed_default, spec.default) {
            ("path", _, _) => "(required)".to_owned(),
            (_, "", "") => String::new(),
            (_, "", default) => format!("`{default}`"),
            (_, computed, _) => computed.to_owned(),
        };
        t.push_str(&format!("| `{}` | {default} | {} |\n", spec.name, spec.description.replace('|', "\\|")));
    }
    t
}

/// Every output with the entry points that set it and its description, as `action.yml` has them.
fn render_output_table() -> String {
    let mut t = String::from("| output | set by | meaning |\n|---|---|---|\n");
    for spec in OUTPUTS {
        let entries: Vec<&str> = spec
            .entries
            .iter()
            .map(|e| match e {
                EntryPoint::Root => "root",
                EntryPoint::Restore => "`restore`",
                EntryPoint::Save => "`save`",
                EntryPoint::Fingerprint => "`fingerprint`",
            })
            .collect();
        t.push_str(&format!("| `{}` | {} | {} |\n", spec.name(), entries.join(", "), spec.description));
    }
    t
}

/// The native facets, as their files in `src/fingerprint/facets/` define them.
fn render_facets_table() -> String {
    let mut t = String::from("| facet | default | records |\n|---|:-:|---|\n");
    for facet in Facet::ALL {
        let default = if facet.is_default() { " ✓ |" } else { " |" };
        t.push_str(&format!("| `{}` |{default} {} |\n", facet.name(), facet.records()));
    }
    t
}

#[test]
fn the_table_of_entry_points_matches_the_input_table() {
    check_generated_part(INPUTS_PAGE, "entry-inputs", &render_entry_table());
}

#[test]
fn the_table_of_outputs_is_the_output_table() {
    check_generated_part(INPUTS_PAGE, "outputs", &render_output_table());
}

#[test]
fn the_table_of_inputs_is_the_registry() {
    check_generated_part(INPUTS_PAGE, "inputs", &render_input_table());
}

#[test]
fn the_table_of_native_facets_is_the_facet_registry() {
    check_generated_part(KEYS_PAGE, "facets", &render_facets_table());
}

/// Where the trust model lives (the README links it).
const GUARANTEES_PAGE: &str = "docs/guarantees.md";

/// Issue 30, finding 7: refs on object stores (and the local store) are claims. The trust model
/// (docs/guarantees.md) says so, says which setup prevents a claim, and that a restore needs no
/// write access (which `azure::a_restore_needs_only_read_access_and_a_read_only_save_claims_nothing`
/// and `local_backend::a_restore_from_a_store_it_may_only_read_hits_and_warns_about_nothing`
/// check on the stores themselves).
#[test]
fn the_trust_model_says_that_whoever_can_write_can_claim_any_ref() {
    let text = page(GUARANTEES_PAGE);
    let start =
        text.find("\n## Trust model\n").unwrap_or_else(|| panic!("{GUARANTEES_PAGE} has a trust model section"));
    let section = &text[start..];
    let section = &section[..section[1..].find("\n## ").map_or(section.len(), |end| end + 1)];
    let flat = section.split_whitespace().collect::<Vec<_>>().join(" ");
    for said in [
        "**whoever can write can claim any ref**",
        "**read-only credentials**",
        "**separate prefix**",
        "**A restore needs no write access** on any store",
        "S3, Azure Blob and the local store",
    ] {
        assert!(flat.contains(said), "the trust model does not say {said:?}:\n{section}");
    }
}
