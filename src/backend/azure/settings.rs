//! Where Azure Blob entries live (account, container, prefix, endpoint) from the inputs and the
//! Azure environment, and who we are there: the credential variables `object_store` reads
//! (`MicrosoftAzureBuilder::from_env`'s names), and a connection string as the Azure tools set
//! it (`AZURE_STORAGE_CONNECTION_STRING`).

use crate::backend::entries;
use crate::env::Env;
use object_store::azure::{AzureConfigKey, MicrosoftAzureBuilder};

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AzureSettings {
    pub account: String,
    pub container: String,
    /// Empty, or ending in `/`.
    pub prefix: String,
    /// Without a trailing `/`: `https://<account>.blob.core.windows.net` unless given (Azurite:
    /// `http://127.0.0.1:10000/devstoreaccount1`; sovereign clouds).
    pub endpoint: String,
    /// Whether the endpoint was given (not derived from the account name).
    pub custom_endpoint: bool,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AzureInputs {
    pub account: Option<String>,
    pub container: Option<String>,
    pub prefix: Option<String>,
    pub endpoint: Option<String>,
}

/// Holds `AccountName=…;AccountKey=…;BlobEndpoint=…`, as the Azure tools set it.
const CONNECTION_STRING: &str = "AZURE_STORAGE_CONNECTION_STRING";

/// Masked from the start, never saved.
pub const SECRET_VARS: &[&str] = &[
    "AZURE_STORAGE_ACCOUNT_KEY",
    "AZURE_STORAGE_ACCESS_KEY",
    "AZURE_STORAGE_KEY",
    "AZURE_STORAGE_SAS_TOKEN",
    "AZURE_STORAGE_SAS_KEY",
    "AZURE_STORAGE_TOKEN",
    "AZURE_CLIENT_SECRET",
    "AZURE_STORAGE_CLIENT_SECRET",
    CONNECTION_STRING,
];

/// The variables that say who we are (never where: the inputs and [`AzureSettings`] do that),
/// with what they set. Later ones win: `AZURE_STORAGE_*` over the generic Azure identity names.
const CREDENTIAL_VARS: [(&str, AzureConfigKey); 19] = [
    // The Azure CLI's name for the account key.
    ("AZURE_STORAGE_KEY", AzureConfigKey::AccessKey),
    ("AZURE_STORAGE_ACCOUNT_KEY", AzureConfigKey::AccessKey),
    ("AZURE_STORAGE_ACCESS_KEY", AzureConfigKey::AccessKey),
    ("AZURE_STORAGE_SAS_KEY", AzureConfigKey::SasKey),
    ("AZURE_STORAGE_SAS_TOKEN", AzureConfigKey::SasKey),
    ("AZURE_STORAGE_TOKEN", AzureConfigKey::Token),
    ("AZURE_CLIENT_ID", AzureConfigKey::ClientId),
    ("AZURE_STORAGE_CLIENT_ID", AzureConfigKey::ClientId),
    ("AZURE_CLIENT_SECRET", AzureConfigKey::ClientSecret),
    ("AZURE_STORAGE_CLIENT_SECRET", AzureConfigKey::ClientSecret),
    ("AZURE_TENANT_ID", AzureConfigKey::AuthorityId),
    ("AZURE_STORAGE_TENANT_ID", AzureConfigKey::AuthorityId),
    ("AZURE_AUTHORITY_HOST", AzureConfigKey::AuthorityHost),
    ("AZURE_FEDERATED_TOKEN_FILE", AzureConfigKey::FederatedTokenFile),
    ("AZURE_MSI_ENDPOINT", AzureConfigKey::MsiEndpoint),
    ("IDENTITY_ENDPOINT", AzureConfigKey::MsiEndpoint),
    ("AZURE_OBJECT_ID", AzureConfigKey::ObjectId),
    ("AZURE_MSI_RESOURCE_ID", AzureConfigKey::MsiResourceId),
    ("AZURE_USE_AZURE_CLI", AzureConfigKey::UseAzureCli),
];

impl AzureSettings {
    /// Inputs first, then the Azure environment: the account from `AZURE_STORAGE_ACCOUNT_NAME`,
    /// `AZURE_STORAGE_ACCOUNT` or the connection string's `AccountName`; the endpoint from
    /// `AZURE_STORAGE_ENDPOINT`, `AZURE_ENDPOINT` or the connection string (`BlobEndpoint`, or
    /// `EndpointSuffix`), else Azure's public cloud. The container is an input only.
    pub fn resolve(inputs: &AzureInputs, env: &Env) -> Result<Self, String> {
        let container = inputs.container.clone().ok_or("`backend: azure-blob` needs `azure-container`")?;
        if !is_container_name(&container) {
            return Err(format!(
                "`azure-container` `{container}` is not a container name (3-63 lowercase letters, digits and \
                 single `-`, starting with a letter or digit)"
            ));
        }
        let connection = env.non_empty(CONNECTION_STRING).map(ConnectionString::parse).unwrap_or_default();
        let account = inputs
            .account
            .clone()
            .or_else(|| env.non_empty("AZURE_STORAGE_ACCOUNT_NAME").map(str::to_owned))
            .or_else(|| env.non_empty("AZURE_STORAGE_ACCOUNT").map(str::to_owned))
            .or_else(|| connection.account_name.clone())
            .ok_or("`backend: azure-blob` needs `azure-account` (or `AZURE_STORAGE_ACCOUNT_NAME`)")?;
        if account.is_empty() || !account.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit()) {
            return Err(format!(
                "`azure-account` `{account}` is not a storage account name (lowercase letters, digits)"
            ));
        }
        let given = inputs
            .endpoint
            .clone()
            .or_else(|| env.non_empty("AZURE_STORAGE_ENDPOINT").map(str::to_owned))
            .or_else(|| env.non_empty("AZURE_ENDPOINT").map(str::to_owned))
            .or_else(|| connection.blob_endpoint(&account));
        let endpoint = given
            .as_deref()
            .map_or_else(|| format!("https://{account}.blob.core.windows.net"), |e| e.trim_end_matches('/').to_owned());
        match url::Url::parse(&endpoint) {
            Ok(url) if matches!(url.scheme(), "http" | "https") && url.query().is_none() => {}
            _ => return Err(format!("`azure-endpoint` `{endpoint}` is not an http(s) URL without a query")),
        }
        let prefix = entries::prefix(inputs.prefix.as_deref());
        Ok(Self { account, container, prefix, endpoint, custom_endpoint: given.is_some() })
    }

    /// `object_store`'s configuration for these settings with the credentials of `env`.
    pub(super) fn builder(&self, env: &Env) -> MicrosoftAzureBuilder {
        let mut builder = MicrosoftAzureBuilder::new()
            .with_account(&self.account)
            .with_container_name(&self.container)
            .with_endpoint(self.endpoint.clone())
            .with_allow_http(self.endpoint.starts_with("http:"));
        let connection = env.non_empty(CONNECTION_STRING).map(ConnectionString::parse).unwrap_or_default();
        if let Some(key) = connection.account_key {
            builder = builder.with_access_key(key);
        }
        if let Some(sas) = connection.sas {
            builder = builder.with_config(AzureConfigKey::SasKey, sas);
        }
        for (name, key) in CREDENTIAL_VARS {
            if let Some(value) = env.non_empty(name) {
                builder = builder.with_config(key, value);
            }
        }
        builder
    }

    /// The secrets of `env`: each secret variable's value, and the key and SAS signature inside a
    /// connection string or a SAS token (they may show up alone).
    pub fn secrets(env: &Env) -> Vec<String> {
        let mut secrets: Vec<String> =
            SECRET_VARS.iter().filter_map(|name| env.non_empty(name)).map(str::to_owned).collect();
        let connection = env.non_empty(CONNECTION_STRING).map(ConnectionString::parse).unwrap_or_default();
        secrets.extend(connection.account_key);
        let tokens = ["AZURE_STORAGE_SAS_TOKEN", "AZURE_STORAGE_SAS_KEY"].into_iter().filter_map(|n| env.non_empty(n));
        for sas in tokens.map(str::to_owned).chain(connection.sas) {
            let query = sas.trim_start_matches('?').to_owned();
            secrets.extend(
                url::form_urlencoded::parse(query.as_bytes()).filter(|(k, _)| k == "sig").map(|(_, v)| v.into_owned()),
            );
        }
        secrets
    }
}

/// Azure's rule for container names.
pub(super) fn is_container_name(name: &str) -> bool {
    (3..=63).contains(&name.len())
        && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-')
        && !name.contains("--")
}

/// The parts of a connection string this backend uses.
#[derive(Debug, Default)]
struct ConnectionString {
    account_name: Option<String>,
    account_key: Option<String>,
    sas: Option<String>,
    blob_endpoint: Option<String>,
    protocol: Option<String>,
    endpoint_suffix: Option<String>,
}

impl ConnectionString {
    /// `Name=value` pairs separated by `;` (names in any case; values may hold `=`).
    fn parse(text: &str) -> Self {
        let mut parsed = Self::default();
        for (name, value) in text.split(';').filter_map(|pair| pair.trim().split_once('=')) {
            let value = Some(value.trim().to_owned()).filter(|v| !v.is_empty());
            match name.trim().to_ascii_lowercase().as_str() {
                "accountname" => parsed.account_name = value,
                "accountkey" => parsed.account_key = value,
                "sharedaccesssignature" => parsed.sas = value,
                "blobendpoint" => parsed.blob_endpoint = value,
                "defaultendpointsprotocol" => parsed.protocol = value,
                "endpointsuffix" => parsed.endpoint_suffix = value,
                _ => {}
            }
        }
        parsed
    }

    fn blob_endpoint(&self, account: &str) -> Option<String> {
        self.blob_endpoint.clone().or_else(|| {
            let suffix = self.endpoint_suffix.as_deref()?;
            Some(format!("{}://{account}.blob.{suffix}", self.protocol.as_deref().unwrap_or("https")))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolve(inputs: AzureInputs, env: &[(&str, &str)]) -> Result<AzureSettings, String> {
        AzureSettings::resolve(&inputs, &Env::from_pairs(env.iter().copied()))
    }

    fn container(name: &str) -> AzureInputs {
        AzureInputs { container: Some(name.into()), ..AzureInputs::default() }
    }

    #[test]
    fn inputs_come_before_the_azure_variables() {
        let env = [
            ("AZURE_STORAGE_ACCOUNT_NAME", "fromenv"),
            ("AZURE_STORAGE_ACCOUNT", "fromcli"),
            ("AZURE_STORAGE_ENDPOINT", "https://fromenv.blob.core.chinacloudapi.cn/"),
        ];
        let s = resolve(container("cache"), &env).unwrap();
        assert_eq!((s.account.as_str(), s.container.as_str()), ("fromenv", "cache"));
        assert_eq!(s.endpoint, "https://fromenv.blob.core.chinacloudapi.cn");
        assert!(s.custom_endpoint);
        let given = AzureInputs {
            account: Some("given".into()),
            endpoint: Some("http://127.0.0.1:10000/given".into()),
            prefix: Some("/ci/".into()),
            ..container("cache")
        };
        let s = resolve(given, &env).unwrap();
        assert_eq!(
            (s.account.as_str(), s.endpoint.as_str(), s.prefix.as_str()),
            ("given", "http://127.0.0.1:10000/given", "ci/")
        );
        let s = resolve(container("cache"), &[("AZURE_STORAGE_ACCOUNT", "fromcli")]).unwrap();
        assert_eq!((s.account.as_str(), s.endpoint.as_str()), ("fromcli", "https://fromcli.blob.core.windows.net"));
        assert!(!s.custom_endpoint);
        assert_eq!(s.prefix, "");
    }

    #[test]
    fn a_connection_string_gives_the_account_the_endpoint_and_the_secrets() {
        let local = "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=a2V5PT0=;\
                     BlobEndpoint=http://127.0.0.1:10000/devstoreaccount1;";
        let env = [(CONNECTION_STRING, local)];
        let s = resolve(container("cache"), &env).unwrap();
        assert_eq!(
            (s.account.as_str(), s.endpoint.as_str()),
            ("devstoreaccount1", "http://127.0.0.1:10000/devstoreaccount1")
        );
        let secrets = AzureSettings::secrets(&Env::from_pairs(env));
        assert!(secrets.contains(&"a2V5PT0=".to_owned()), "{secrets:?}");
        let sovereign =
            "AccountName=acct;SharedAccessSignature=sv=2022&sig=c2ln%3D;EndpointSuffix=core.usgovcloudapi.net";
        let s = resolve(container("cache"), &[(CONNECTION_STRING, sovereign)]).unwrap();
        assert_eq!(s.endpoint, "https://acct.blob.core.usgovcloudapi.net");
        let secrets = AzureSettings::secrets(&Env::from_pairs([(CONNECTION_STRING, sovereign)]));
        assert!(secrets.contains(&"c2ln=".to_owned()), "the signature alone: {secrets:?}");
        let secrets = AzureSettings::secrets(&Env::from_pairs([("AZURE_STORAGE_SAS_TOKEN", "?sv=1&sig=abc")]));
        assert_eq!(secrets, ["?sv=1&sig=abc", "abc"]);
    }

    #[test]
    fn names_are_checked_before_any_request() {
        assert!(
            resolve(AzureInputs::default(), &[("AZURE_STORAGE_ACCOUNT_NAME", "a")])
                .unwrap_err()
                .contains("azure-container")
        );
        assert!(resolve(container("cache"), &[]).unwrap_err().contains("azure-account"));
        for bad in ["Cache", "ca", "-cache", "cache-", "ca--che", "ca_che"] {
            assert!(resolve(container(bad), &[("AZURE_STORAGE_ACCOUNT_NAME", "a")]).is_err(), "{bad}");
        }
        assert!(resolve(container("cache"), &[("AZURE_STORAGE_ACCOUNT_NAME", "My-Account")]).is_err());
        let bad_endpoint = AzureInputs { endpoint: Some("ftp://x".into()), ..container("cache") };
        assert!(resolve(bad_endpoint, &[("AZURE_STORAGE_ACCOUNT_NAME", "a")]).is_err());
    }
}
