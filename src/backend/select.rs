//! Which backend serves this run: a pure function of the inputs and the environment, following
//! the official client's rule.
//!
//! 1. `backend: local` → the local directory; `backend: s3` → S3 (`s3-*` inputs).
//! 2. The protocol: `protocol: v1|v2`, else `ACTIONS_CACHE_API_FORCE_VERSION`, else **v1 on
//!    GHES** (any `GITHUB_SERVER_URL` host but `github.com`, `*.ghe.com`, `*.localhost`), else
//!    **v2 when `ACTIONS_CACHE_SERVICE_V2` is non-empty** (even `false`, as the toolkit does),
//!    else v1.
//! 3. v2 needs `ACTIONS_RESULTS_URL` and `ACTIONS_RUNTIME_TOKEN`; v1 needs `ACTIONS_CACHE_URL`
//!    (falling back to `ACTIONS_RESULTS_URL`).
//! 4. `backend: auto` with no service configured → the local directory; `backend: github` with
//!    none → unavailable (every call fails as service trouble, with the reason).

use crate::choice;
use crate::env::Env;
use std::path::PathBuf;

crate::choice::named_enum! {
    /// The `backend` input: which kind of backend the user asks for.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum BackendChoice {
        Auto => "auto",
        Github => "github",
        Local => "local",
        S3 => "s3",
    }
}

crate::choice::named_enum! {
    /// The `protocol` input (and `ACTIONS_CACHE_API_FORCE_VERSION`): which cache service protocol.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum Protocol {
        Auto => "auto",
        V1 => "v1",
        V2 => "v2",
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Choice {
    Local {
        dir: PathBuf,
    },
    V1 {
        cache_url: String,
        token: Option<String>,
    },
    V2 {
        results_url: String,
        token: String,
    },
    /// `backend: s3` (its settings come from the `s3-*` inputs).
    S3,
    Unavailable {
        reason: String,
    },
}

/// Whether `GITHUB_SERVER_URL` names a GitHub Enterprise Server (which only speaks v1).
pub fn is_ghes(env: &Env) -> bool {
    let server = env.non_empty("GITHUB_SERVER_URL").unwrap_or("https://github.com");
    let host = url::Url::parse(server).ok().and_then(|u| u.host_str().map(str::to_ascii_uppercase)).unwrap_or_default();
    !(host == "GITHUB.COM" || host.ends_with(".GHE.COM") || host.ends_with(".LOCALHOST"))
}

pub fn choose(backend: BackendChoice, protocol: Protocol, local_dir: PathBuf, env: &Env) -> Choice {
    match backend {
        BackendChoice::Local => return Choice::Local { dir: local_dir },
        BackendChoice::S3 => return Choice::S3,
        _ => {}
    }
    let protocol = match protocol {
        Protocol::Auto => {
            env.non_empty("ACTIONS_CACHE_API_FORCE_VERSION").and_then(choice::parse).unwrap_or(Protocol::Auto)
        }
        explicit => explicit,
    };
    let v2 = match protocol {
        Protocol::V1 => false,
        Protocol::V2 => true,
        Protocol::Auto => !is_ghes(env) && env.non_empty("ACTIONS_CACHE_SERVICE_V2").is_some(),
    };
    let token = env.non_empty("ACTIONS_RUNTIME_TOKEN").map(str::to_owned);
    let service = if v2 {
        match (env.non_empty("ACTIONS_RESULTS_URL"), token) {
            (Some(url), Some(token)) => Some(Choice::V2 { results_url: url.to_owned(), token }),
            (Some(_), None) => {
                return Choice::Unavailable {
                    reason: "cache service v2 needs `ACTIONS_RUNTIME_TOKEN`, which is not set".into(),
                };
            }
            (None, _) => None,
        }
    } else {
        env.non_empty("ACTIONS_CACHE_URL")
            .or_else(|| env.non_empty("ACTIONS_RESULTS_URL"))
            .map(|url| Choice::V1 { cache_url: url.to_owned(), token })
    };
    match (service, backend) {
        (Some(choice), _) => choice,
        (None, BackendChoice::Github) => Choice::Unavailable {
            reason: format!(
                "`backend: github`, but no cache service is configured (`{}` is not set; is this a `run:` or \
                 composite step? Use the action itself)",
                if v2 { "ACTIONS_RESULTS_URL" } else { "ACTIONS_CACHE_URL" }
            ),
        },
        (None, _) => Choice::Local { dir: local_dir },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pick(backend: BackendChoice, protocol: Protocol, pairs: &[(&str, &str)]) -> Choice {
        choose(backend, protocol, PathBuf::from("/local"), &Env::from_pairs(pairs.iter().copied()))
    }

    const HOSTED: &[(&str, &str)] = &[
        ("GITHUB_SERVER_URL", "https://github.com"),
        ("ACTIONS_CACHE_SERVICE_V2", "True"),
        ("ACTIONS_RESULTS_URL", "https://results.example/"),
        ("ACTIONS_CACHE_URL", "https://retired-v1.example/abc/"),
        ("ACTIONS_RUNTIME_TOKEN", "tok"),
    ];

    #[test]
    fn a_table_of_environments() {
        use BackendChoice::*;
        let v2 = Choice::V2 { results_url: "https://results.example/".into(), token: "tok".into() };
        let v1_retired = Choice::V1 { cache_url: "https://retired-v1.example/abc/".into(), token: Some("tok".into()) };
        let local = Choice::Local { dir: "/local".into() };

        // github.com and GHE.com data residency: v2.
        assert_eq!(pick(Auto, Protocol::Auto, HOSTED), v2);
        let mut ghe = HOSTED.to_vec();
        ghe[0] = ("GITHUB_SERVER_URL", "https://acme.ghe.com");
        assert_eq!(pick(Auto, Protocol::Auto, &ghe), v2);
        // The flag is a non-empty test, as in the toolkit.
        let mut flag_false = HOSTED.to_vec();
        flag_false[1] = ("ACTIONS_CACHE_SERVICE_V2", "false");
        assert_eq!(pick(Auto, Protocol::Auto, &flag_false), v2);

        // GHES: v1 whatever the flag says.
        let mut ghes = HOSTED.to_vec();
        ghes[0] = ("GITHUB_SERVER_URL", "https://git.corp.example");
        assert_eq!(pick(Auto, Protocol::Auto, &ghes), v1_retired);

        // nektos/act: v1, no token, the cache URL carries its secret in the path.
        let act = [
            ("GITHUB_SERVER_URL", "https://github.com"),
            ("ACTIONS_CACHE_URL", "http://10.0.0.2:34567/0123abcd/"),
            ("ACTIONS_RESULTS_URL", "http://10.0.0.2:40000/"),
        ];
        assert_eq!(
            pick(Auto, Protocol::Auto, &act),
            Choice::V1 { cache_url: "http://10.0.0.2:34567/0123abcd/".into(), token: None }
        );

        // No runner at all: the local directory, unless the service is demanded.
        assert_eq!(pick(Auto, Protocol::Auto, &[]), local);
        assert!(matches!(pick(Github, Protocol::Auto, &[]), Choice::Unavailable { .. }));
        // Overrides.
        assert_eq!(pick(Local, Protocol::Auto, HOSTED), local);
        assert_eq!(pick(Auto, Protocol::V1, HOSTED), v1_retired);
        let mut forced = HOSTED.to_vec();
        forced.push(("ACTIONS_CACHE_API_FORCE_VERSION", "v1"));
        assert_eq!(pick(Auto, Protocol::Auto, &forced), v1_retired);
        // v2 without a token cannot work, and says why.
        let no_token: Vec<_> = HOSTED.iter().copied().filter(|(k, _)| *k != "ACTIONS_RUNTIME_TOKEN").collect();
        let Choice::Unavailable { reason } = pick(Auto, Protocol::Auto, &no_token) else { panic!() };
        assert!(reason.contains("ACTIONS_RUNTIME_TOKEN"));
    }
}
