//! A streamable-HTTP server's transport: the same HTTP client setup as the model providers'
//! (rustls with the ring provider and the webpki roots, no redirects, no proxy for this
//! machine's addresses), the configured headers on every request.

use std::collections::HashMap;
use std::sync::Arc;

use reqwest::header::{HeaderName, HeaderValue};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;

use crate::spec::Header;

/// The transport to `url`; `Err` says what is wrong with the URL, a header or TLS.
pub(crate) fn transport(
    url: &str,
    headers: &[Header],
) -> Result<StreamableHttpClientTransport<reqwest::Client>, String> {
    let mut custom = HashMap::new();
    for h in headers {
        let name = HeaderName::from_bytes(h.name.as_bytes())
            .map_err(|e| format!("header name {:?}: {e}", h.name))?;
        let mut value = HeaderValue::from_str(&h.value)
            .map_err(|_| format!("the value of header {} is not a valid header value", h.name))?;
        value.set_sensitive(true);
        custom.insert(name, value);
    }
    let config =
        StreamableHttpClientTransportConfig::with_uri(url.to_owned()).custom_headers(custom);
    Ok(StreamableHttpClientTransport::with_client(
        client(url)?,
        config,
    ))
}

fn client(url: &str) -> Result<reqwest::Client, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    let mut tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("cannot set up TLS: {e}"))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    tls.alpn_protocols = vec![b"http/1.1".to_vec()];
    let mut builder = reqwest::Client::builder()
        .tls_backend_preconfigured(tls)
        .redirect(reqwest::redirect::Policy::none())
        .user_agent(concat!("dsh/", env!("CARGO_PKG_VERSION")));
    if loopback(url) {
        builder = builder.no_proxy();
    }
    builder
        .build()
        .map_err(|e| format!("cannot set up the HTTP client: {e}"))
}

fn loopback(url: &str) -> bool {
    let Some(host) = reqwest::Url::parse(url)
        .ok()
        .and_then(|u| u.host_str().map(str::to_owned))
    else {
        return false;
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}
