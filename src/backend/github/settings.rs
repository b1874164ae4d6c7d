//! Which cache service protocol serves this run: a pure function of the `protocol` input and
//! the environment, following the official client's rule.
//!
//! 1. The protocol: `protocol: v1|v2`, else `ACTIONS_CACHE_API_FORCE_VERSION`, else **v1 on
//!    GHES** (any `GITHUB_SERVER_URL` host but `github.com`, `*.ghe.com`, `*.localhost`), else
//!    **v2 when `ACTIONS_CACHE_SERVICE_V2` is non-empty** (even `false`, as the toolkit does),
//!    else v1.
//! 2. v2 needs `ACTIONS_RESULTS_URL` and `ACTIONS_RUNTIME_TOKEN`; v1 needs `ACTIONS_CACHE_URL`
//!    (falling back to `ACTIONS_RESULTS_URL`).
//! 3. No service configured: `backend: auto` takes the next store (the local directory);
//!    `backend: github` is unavailable (every call fails as service trouble, with the reason).

use crate::choice;
use crate::env::Env;

crate::choice::named_enum! {
    /// The `protocol` input (and `ACTIONS_CACHE_API_FORCE_VERSION`): which cache service protocol.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum Protocol {
        Auto => "auto",
        V1 => "v1",
        V2 => "v2",
    }
}

/// A cache service and how to reach it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Service {
    V1 { cache_url: String, token: Option<String> },
    V2 { results_url: String, token: String },
}

/// Whether `GITHUB_SERVER_URL` names a GitHub Enterprise Server (which only speaks v1).
pub fn is_ghes(env: &Env) -> bool {
    let server = env.non_empty("GITHUB_SERVER_URL").unwrap_or("https://github.com");
    let host = url::Url::parse(server).ok().and_then(|u| u.host_str().map(str::to_ascii_uppercase)).unwrap_or_default();
    !(host == "GITHUB.COM" || host.ends_with(".GHE.COM") || host.ends_with(".LOCALHOST"))
}

/// The service the environment offers under `protocol`: `None` when none is configured, an
/// error (the reason) when one is but cannot work.
pub fn service(protocol: Protocol, env: &Env) -> Option<Result<Service, String>> {
    let token = env.non_empty("ACTIONS_RUNTIME_TOKEN").map(str::to_owned);
    if speaks_v2(protocol, env) {
        let url = env.non_empty("ACTIONS_RESULTS_URL")?;
        Some(match token {
            Some(token) => Ok(Service::V2 { results_url: url.to_owned(), token }),
            None => Err("cache service v2 needs `ACTIONS_RUNTIME_TOKEN`, which is not set".into()),
        })
    } else {
        env.non_empty("ACTIONS_CACHE_URL")
            .or_else(|| env.non_empty("ACTIONS_RESULTS_URL"))
            .map(|url| Ok(Service::V1 { cache_url: url.to_owned(), token }))
    }
}

/// Whether the run speaks v2: `protocol`, else `ACTIONS_CACHE_API_FORCE_VERSION`, else v1 on
/// GHES and v2 where the runner announces it.
fn speaks_v2(protocol: Protocol, env: &Env) -> bool {
    let protocol = match protocol {
        Protocol::Auto => {
            env.non_empty("ACTIONS_CACHE_API_FORCE_VERSION").and_then(choice::parse).unwrap_or(Protocol::Auto)
        }
        explicit => explicit,
    };
    match protocol {
        Protocol::V1 => false,
        Protocol::V2 => true,
        Protocol::Auto => !is_ghes(env) && env.non_empty("ACTIONS_CACHE_SERVICE_V2").is_some(),
    }
}

/// Why `backend: github` has no service.
pub fn no_service_reason(protocol: Protocol, env: &Env) -> String {
    let v2 = speaks_v2(protocol, env);
    format!(
        "`backend: github`, but no cache service is configured (`{}` is not set; is this a `run:` or composite \
         step? Use the action itself)",
        if v2 { "ACTIONS_RESULTS_URL" } else { "ACTIONS_CACHE_URL" }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pick(protocol: Protocol, pairs: &[(&str, &str)]) -> Option<Result<Service, String>> {
        service(protocol, &Env::from_pairs(pairs.iter().copied()))
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
        let v2 = Some(Ok(Service::V2 { results_url: "https://results.example/".into(), token: "tok".into() }));
        let v1_retired =
            Some(Ok(Service::V1 { cache_url: "https://retired-v1.example/abc/".into(), token: Some("tok".into()) }));

        // github.com and GHE.com data residency: v2.
        assert_eq!(pick(Protocol::Auto, HOSTED), v2);
        let mut ghe = HOSTED.to_vec();
        ghe[0] = ("GITHUB_SERVER_URL", "https://acme.ghe.com");
        assert_eq!(pick(Protocol::Auto, &ghe), v2);
        // The flag is a non-empty test, as in the toolkit.
        let mut flag_false = HOSTED.to_vec();
        flag_false[1] = ("ACTIONS_CACHE_SERVICE_V2", "false");
        assert_eq!(pick(Protocol::Auto, &flag_false), v2);

        // GHES: v1 whatever the flag says.
        let mut ghes = HOSTED.to_vec();
        ghes[0] = ("GITHUB_SERVER_URL", "https://git.corp.example");
        assert_eq!(pick(Protocol::Auto, &ghes), v1_retired);

        // nektos/act: v1, no token, the cache URL carries its secret in the path.
        let act = [
            ("GITHUB_SERVER_URL", "https://github.com"),
            ("ACTIONS_CACHE_URL", "http://10.0.0.2:34567/0123abcd/"),
            ("ACTIONS_RESULTS_URL", "http://10.0.0.2:40000/"),
        ];
        assert_eq!(
            pick(Protocol::Auto, &act),
            Some(Ok(Service::V1 { cache_url: "http://10.0.0.2:34567/0123abcd/".into(), token: None }))
        );

        // No runner at all: no service, and `backend: github` says which variable is missing.
        assert_eq!(pick(Protocol::Auto, &[]), None);
        assert!(no_service_reason(Protocol::Auto, &Env::default()).contains("`ACTIONS_CACHE_URL` is not set"));
        // Overrides.
        assert_eq!(pick(Protocol::V1, HOSTED), v1_retired);
        let mut forced = HOSTED.to_vec();
        forced.push(("ACTIONS_CACHE_API_FORCE_VERSION", "v1"));
        assert_eq!(pick(Protocol::Auto, &forced), v1_retired);
        // v2 without a token cannot work, and says why.
        let no_token: Vec<_> = HOSTED.iter().copied().filter(|(k, _)| *k != "ACTIONS_RUNTIME_TOKEN").collect();
        let Some(Err(reason)) = pick(Protocol::Auto, &no_token) else { panic!() };
        assert!(reason.contains("ACTIONS_RUNTIME_TOKEN"));
    }
}
