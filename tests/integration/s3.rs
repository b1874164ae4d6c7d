//! `backend: s3` against a real S3 server (`s3s-fs`, which checks every SigV4 signature): round
//! trips and exact-key misses, wrong or missing credentials, an `https://` endpoint on a
//! plain-HTTP server, a missing bucket, a server that dies
//! mid-transfer, `prune`/`explain`, bounded memory, and secrets; and against doubles for what
//! s3s-fs does not do: a completion that loses the race, an endpoint echoing signed requests.
//! What every store must do (tampered and hostile entries, racing saves, `grow`) runs on S3 too,
//! in the store matrix of `safety`, `concurrency` and `grow`.

use std::collections::BTreeMap;

use crate::support::needs;
use crate::support::s3::{ACCESS_KEY, BUCKET, EchoingS3, RacedS3, S3Server, SECRET_KEY, credentials};
use crate::support::{NO_STATE, Step, noise, snapshot, write};

/// A step against `server`: its S3 inputs, `path: out` and `native: none` go to every run.
fn step(server: &S3Server) -> Step {
    let mut step = Step::against(server.env());
    step.set_env("GITHUB_REF", "refs/heads/main");
    for (name, value) in server.inputs() {
        step.set_input(name, value);
    }
    step.set_input("path", "out");
    step.set_input("native", "none");
    step
}

fn generate(step: &Step) {
    write(&step.ws.join("out/model.pth"), &noise(3 << 20, 7));
    write(&step.ws.join("out/sub/expected.txt"), b"expected output\n");
}

/// The one stored entry object (not s3s-fs's own metadata files, nor the packs under `packs/`).
fn only_object(server: &S3Server) -> std::path::PathBuf {
    let objects: Vec<_> =
        server.objects().into_iter().filter(|o| o.starts_with("ci") && !o.starts_with("ci/packs/")).collect();
    assert_eq!(objects.len(), 1, "{objects:?}");
    objects.into_iter().next().unwrap()
}

/// How many packs are stored.
fn packs(server: &S3Server) -> usize {
    server.objects().into_iter().filter(|o| o.starts_with("ci/packs/")).count()
}

#[needs(s3s_fs)]
fn a_round_trip_reuses_exactly_and_another_fingerprint_misses() {
    let server = S3Server::start();
    let saver = step(&server);
    generate(&saver);
    let saved = saver.run(&["save"], &[], NO_STATE);
    assert_eq!(saved.output("save-result"), "saved", "{}", saved.stdout);
    assert!(saved.stdout.contains(&format!("S3 bucket `{BUCKET}`, prefix `ci/`")), "{}", saved.stdout);
    let object = only_object(&server);
    assert!(object.starts_with(format!("ci/{}", saved.output("key"))), "{object:?}");
    assert_eq!(packs(&server), 1, "the files' content, in one pack");

    let fresh = step(&server);
    let restored = fresh.run(&["restore"], &[], NO_STATE);
    assert_eq!(restored.output("reused"), "true", "{}", restored.stdout);
    assert_eq!(snapshot(&fresh.ws.join("out")), snapshot(&saver.ws.join("out")));

    // Another fingerprint: an exact miss, never a fallback, and explained from the bucket.
    let other = step(&server);
    let missed = other.run(&["restore"], &[("variant", "gpu")], NO_STATE);
    assert_eq!(missed.output("miss-reason"), "not-found", "{}", missed.stdout);
    assert!(!other.ws.join("out").exists());
    assert!(missed.stdout.contains("variant"), "explain-misses read the other entry's fingerprint: {}", missed.stdout);

    // A second save of the same key is `exists`, and nothing else was stored.
    assert_eq!(saver.run(&["save"], &[], NO_STATE).output("save-result"), "exists");
    only_object(&server);
    assert_eq!(packs(&server), 1);
}

#[test]
fn a_completion_that_loses_the_race_carries_the_condition_and_is_exists() {
    // s3s-fs does not serialize `If-None-Match` (above): a double that enforces it checks the
    // condition is sent, and that its refusal (412, or 409 while another completion is in
    // flight) is `exists`, not an error — and that the upload is aborted.
    for refusal in [412, 409] {
        let server = RacedS3::start(refusal);
        let mut saver = Step::against(credentials());
        saver.set_env("GITHUB_REF", "refs/heads/main");
        // The entry's own completion (a save's packs are objects completed before it).
        saver.set_env("EXACT_CACHE_CONTENT", "whole");
        generate(&saver);
        let endpoint = server.endpoint();
        let inputs = [
            ("backend", "s3"),
            ("s3-bucket", BUCKET),
            ("s3-endpoint", endpoint.as_str()),
            ("s3-prefix", "ci"),
            ("path", "out"),
            ("native", "none"),
        ];
        let saved = saver.run(&["save"], &inputs, NO_STATE);
        assert_eq!((saved.code, saved.output("save-result")), (0, "exists"), "HTTP {refusal}: {}", saved.stdout);
        assert!(!saved.stdout.contains("::warning::"), "HTTP {refusal}: {}", saved.stdout);
        let requests = server.requests();
        let completions: Vec<_> = requests
            .iter()
            .filter(|r| r.method == "POST" && r.target.contains("uploadId=") && !r.target.contains("uploads"))
            .collect();
        assert_eq!(completions.len(), 1, "HTTP {refusal}: one completion, never retried: {requests:#?}");
        assert_eq!(completions[0].if_none_match.as_deref(), Some("*"), "HTTP {refusal}: {requests:#?}");
        assert!(
            requests.iter().any(|r| r.method == "DELETE" && r.target.contains("uploadId=raced-1")),
            "HTTP {refusal}: the refused upload is aborted: {requests:#?}"
        );
    }
}

/// A restore the store fails: a warning holding `message`, a `service-error` miss, and the job
/// goes on.
fn restore_warns(step: &Step, inputs: &[(&str, &str)], message: &str) {
    let r = step.run(&["restore"], inputs, NO_STATE);
    assert_eq!((r.code, r.output("miss-reason")), (0, "service-error"), "{}", r.stdout);
    assert!(r.stdout.contains("::warning::") && r.stdout.contains(message), "{}", r.stdout);
}

#[needs(s3s_fs)]
fn wrong_credentials_and_a_missing_bucket_are_clear_warnings_and_fail_under_strict() {
    let server = S3Server::start();
    let mut wrong = step(&server);
    wrong.set_env("AWS_SECRET_ACCESS_KEY", "not-the-secret-key-0123456789");
    generate(&wrong);
    restore_warns(&wrong, &[], "access denied (HTTP 403");
    let s = wrong.run(&["save"], &[], NO_STATE);
    assert_eq!((s.code, s.output("save-result")), (0, "error"), "{}", s.stdout);
    assert_ne!(wrong.run(&["restore"], &[("strict", "true")], NO_STATE).code, 0, "strict fails the step");

    let missing = step(&server);
    let r = missing.run(&["restore"], &[("s3-bucket", "no-such-bucket")], NO_STATE);
    assert_eq!(r.output("miss-reason"), "service-error", "{}", r.stdout);
    // The save's warning says access is denied; the restore's, that the bucket does not exist.
    let said = format!("--- save, wrong key\n{}--- restore, no bucket\n{}", s.said(), r.said());
    let said = said.replace(wrong.dir.path().to_str().unwrap(), "[TMP]");
    crate::support::assert_shown!(missing.dir.path(), "s3_wrong_credentials_and_a_missing_bucket", said);
}

/// `list` on the command line against `endpoint`, as run from a workstation: it fails, and
/// what it printed holds `message`.
fn list_fails(step: &Step, endpoint: &str, message: &str) {
    let flags = ["list", "--backend", "s3", "--s3-bucket", BUCKET, "--s3-endpoint", endpoint, "--prefix", "p"];
    let r = step.run(&flags, &[], NO_STATE);
    let printed = format!("{}{}", r.stdout, r.stderr);
    assert!(r.code != 0 && printed.contains(message), "{printed}");
}

/// Run `f`, which must end within 5 s.
fn at_once(f: impl FnOnce()) {
    let started = std::time::Instant::now();
    f();
    assert!(started.elapsed() < std::time::Duration::from_secs(5), "never retried: {:?}", started.elapsed());
}

#[needs(s3s_fs)]
fn an_https_endpoint_on_a_plain_http_server_fails_at_once_and_says_use_http() {
    let server = S3Server::start();
    let mut s = step(&server);
    // A transient failure would be retried 10 s, then 20 s later: failing sooner shows it is not.
    s.set_env("EXACT_CACHE_RETRY_BASE_MS", "10000");
    generate(&s);
    let https = server.endpoint().replace("http://", "https://");
    let use_http = format!("the endpoint does not speak TLS: use `{}`", server.endpoint());
    at_once(|| restore_warns(&s, &[("s3-endpoint", &https)], &use_http));
    at_once(|| list_fails(&s, &https, &use_http));
}

#[needs(s3s_fs)]
fn missing_credentials_name_the_variables_to_set() {
    let server = S3Server::start();
    let mut half = step(&server);
    half.extra_env.retain(|(name, _)| name != "AWS_ACCESS_KEY_ID");
    generate(&half);
    let named = "`AWS_SECRET_ACCESS_KEY` is set but `AWS_ACCESS_KEY_ID` is not";
    restore_warns(&half, &[], named);
    list_fails(&half, &server.endpoint(), named);

    // None set: the instance metadata service is the last source (here the S3 server, which
    // refuses), and the message names what to set.
    let mut none = step(&server);
    none.extra_env.retain(|(name, _)| !name.starts_with("AWS_"));
    none.set_env("AWS_METADATA_ENDPOINT", server.endpoint());
    list_fails(&none, &server.endpoint(), "no AWS credentials: set `AWS_ACCESS_KEY_ID` and `AWS_SECRET_ACCESS_KEY`");
}

#[needs(s3s_fs)]
fn the_secret_key_and_signatures_never_reach_the_log() {
    let server = S3Server::start();
    let mut s = step(&server);
    s.set_env("AWS_SESSION_TOKEN", "session-token-value-0123456789abcdef");
    generate(&s);
    let mut everything = String::new();
    for args in [&["save"][..], &["restore"], &["list"]] {
        let r = s.run(args, &[], NO_STATE);
        everything.push_str(&r.readable());
    }
    // Wrong credentials make the service answer with errors: those are logged too.
    let mut wrong = step(&server);
    wrong.set_env("AWS_SECRET_ACCESS_KEY", "wrong-secret-value-0123456789abcdef");
    everything.push_str(&wrong.run(&["restore"], &[], NO_STATE).readable());
    for secret in [SECRET_KEY, "session-token-value-0123456789abcdef", "wrong-secret-value-0123456789abcdef"] {
        assert!(!everything.contains(secret), "`{secret}` leaked");
    }
    assert!(!everything.contains("X-Amz-Signature="), "a signed URL leaked: {everything}");
    assert!(everything.contains(ACCESS_KEY) || !everything.contains("AKIA"), "the access key id is not a secret");
    // A file holding the secret key is never uploaded.
    write(&s.ws.join("out/creds.txt"), format!("key={SECRET_KEY}\n").as_bytes());
    let leak = s.run(&["save"], &[("variant", "leak")], NO_STATE);
    assert_eq!(leak.output("save-result"), "secret-found", "{}", leak.stdout);
}

/// A session token as AWS issues them: base64, so its URL-encoded form in a signed URL differs.
const SESSION_TOKEN: &str = "FQoGZXIvYXdzEKr7q+Sn4/Tk9xJ2m=Qw7vL0pZ8rT4+hY6cB1dN3/gE5==";

/// Every run of `text`'s characters of length `len`.
fn windows(text: &str, len: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    chars.windows(len).map(|w| w.iter().collect()).collect()
}

#[needs(s3s_fs)]
#[ignore = "slow: 300 paddings of a signed request"]
fn a_server_echoing_the_signed_request_never_shows_part_of_a_secret_at_any_padding() {
    // The server answers the listing with `n` characters, then the signed request: whatever
    // `n`, the cut of its words (300 characters) falls somewhere else in the token or the
    // signature, and redaction must come first.
    let server = EchoingS3::start();
    let encoded: String = SESSION_TOKEN
        .bytes()
        .map(|b| if b.is_ascii_alphanumeric() { (b as char).to_string() } else { format!("%{b:02X}") })
        .collect();
    let fragments: Vec<String> = windows(SESSION_TOKEN, 8).into_iter().chain(windows(&encoded, 8)).collect();
    let run = |padding: usize| {
        let mut step = Step::against(credentials());
        step.set_env("AWS_SESSION_TOKEN", SESSION_TOKEN);
        step.set_env("GITHUB_REF", "refs/heads/main");
        let prefix = format!("p{padding}");
        let inputs = [
            ("backend", "s3"),
            ("s3-bucket", BUCKET),
            ("s3-endpoint", &server.endpoint()),
            ("s3-prefix", &prefix),
            ("path", "out"),
            ("native", "none"),
        ];
        let r = step.run(&["restore"], &inputs, NO_STATE);
        assert_eq!(r.output("miss-reason"), "service-error", "{}", r.stdout);
        r
    };
    let paddings: Vec<usize> = (0..=300).collect();
    let shown: Vec<(usize, String, String)> = std::thread::scope(|s| {
        let tasks: Vec<_> = paddings
            .chunks(paddings.len().div_ceil(6))
            .map(|chunk| {
                s.spawn(|| {
                    chunk
                        .iter()
                        .map(|&n| {
                            let r = run(n);
                            let warning = r.stdout.lines().find(|l| l.starts_with("::warning::")).unwrap_or_default();
                            (n, warning.to_owned(), r.readable())
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        tasks.into_iter().flat_map(|t| t.join().unwrap()).collect()
    });
    for (n, warning, readable) in &shown {
        // Workflow commands carry `%` as `%25`: read the log as the runner shows it, too.
        let readable = &format!("{readable}\n{}", readable.replace("%25", "%"));
        assert!(warning.contains("HTTP 400: x") || *n == 0, "padding {n}: {warning}");
        for fragment in &fragments {
            assert!(!readable.contains(fragment.as_str()), "padding {n}: `{fragment}` of the token shown:\n{readable}");
        }
        for name in ["X-Amz-Security-Token=", "X-Amz-Signature="] {
            for (i, _) in readable.match_indices(name) {
                let next = readable[i + name.len()..].chars().next().unwrap_or('*');
                assert!(
                    !next.is_ascii_alphanumeric() && next != '%',
                    "padding {n}: a part of `{name}` shown:\n{readable}"
                );
            }
        }
    }
    // The echo reaches the user (so the cut is exercised), with the token and signature redacted.
    let (_, first, _) = &shown[0];
    assert!(first.contains("HTTP 400: /ci-cache/?") && first.contains("X-Amz-Security-Token=***"), "{first}");
}

#[needs(s3s_fs)]
#[ignore = "slow: kills and restarts the S3 server mid-transfer"]
fn a_server_that_dies_mid_upload_commits_nothing_and_mid_download_places_nothing() {
    let _disk = crate::support::one_disk_heavy_test_at_a_time(2);
    let mut server = S3Server::start();
    let mut saver = step(&server);
    saver.set_env("EXACT_CACHE_UPLOAD_BLOCK_MIB", "5");
    saver.set_env("EXACT_CACHE_ATTEMPTS", "1");
    write(&saver.ws.join("out/weights.bin"), &noise(120 << 20, 3));
    let none = [("compression", "none")];
    let (killed, saver) = std::thread::scope(|scope| {
        let handle = scope.spawn(move || (saver.run(&["save"], &none, NO_STATE), saver));
        while server.unfinished_uploads().is_empty() {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        server.kill();
        handle.join().unwrap()
    });
    assert_eq!((killed.code, killed.output("save-result")), (0, "error"), "{}", killed.stdout);
    server.restart();
    assert!(server.objects().iter().all(|o| !o.starts_with("ci")), "nothing committed: {:?}", server.objects());

    // Now saved whole; a restore that loses the server midway places nothing.
    assert_eq!(saver.run(&["save"], &none, NO_STATE).output("save-result"), "saved");
    let mut victim = step(&server);
    victim.set_env("EXACT_CACHE_ATTEMPTS", "1");
    victim.set_env("EXACT_CACHE_DOWNLOAD_CHUNK_MIB", "1");
    victim.set_env("EXACT_CACHE_DOWNLOAD_CONCURRENCY", "1");
    write(&victim.ws.join("out/keep.txt"), b"mine");
    let before: BTreeMap<String, String> = snapshot(&victim.ws.join("out"));
    let (r, victim) = std::thread::scope(|scope| {
        let handle = scope.spawn(move || (victim.run(&["restore"], &none, NO_STATE), victim));
        std::thread::sleep(std::time::Duration::from_millis(300));
        server.kill();
        handle.join().unwrap()
    });
    assert_eq!(r.output("reused"), "false", "{}", r.stdout);
    assert_eq!(snapshot(&victim.ws.join("out")), before, "targets untouched");
}

#[needs(s3s_fs)]
#[ignore = "slow: 30k files and 1 GiB through S3"]
fn thirty_thousand_files_and_a_gigabyte_of_weights_round_trip_in_bounded_memory() {
    let _disk = crate::support::one_disk_heavy_test_at_a_time(4);
    let server = S3Server::start();
    let mut saver = step(&server);
    saver.measure = true;
    crate::support::random_file(&saver.ws.join("out/weights/layer0.pth"), 1 << 30);
    for i in 0..30_000u32 {
        let path = saver.ws.join(format!("out/inductor/{:02x}/c{i:05}.py", i % 256));
        write(&path, format!("# kernel {i}\n{}", "tmp = x * 0.5\n".repeat((i % 30) as usize)).as_bytes());
    }
    let saved = saver.run(&["save"], &[], NO_STATE);
    assert_eq!(saved.output("save-result"), "saved", "{}", saved.stdout);
    let mut fresh = step(&server);
    fresh.measure = true;
    let restored = fresh.run(&["restore"], &[], NO_STATE);
    assert_eq!(restored.output("reused"), "true", "{}", restored.stdout);
    assert_eq!(restored.output("restored-files"), "30001");
    assert_eq!(snapshot(&fresh.ws.join("out")), snapshot(&saver.ws.join("out")));
    let (save_rss, restore_rss) = (saved.peak_rss_mib.unwrap(), restored.peak_rss_mib.unwrap());
    eprintln!(
        "S3 round trip of 30,001 files / 1 GiB: peak RSS {save_rss:.0} MiB saving, {restore_rss:.0} MiB restoring"
    );
    assert!(save_rss < 300.0 && restore_rss < 300.0, "save {save_rss:.0} MiB, restore {restore_rss:.0} MiB");
}
