//! Each shape, known values, what must pass untouched, and the structured value.

use serde_json::json;

use super::*;

/// A redactor knowing no value.
fn shapes_only() -> Redact {
    Redact::new([])
}

fn redacted(r: &Redact, text: &str) -> String {
    r.redact_text(text)
        .unwrap_or_else(|| panic!("nothing redacted in {text:?}"))
}

// Fake credentials of the real shapes (AWS's own documentation examples for AWS).
const GITHUB: &str = "ghp_0123456789abcdefghijABCDEFGHIJ012345";
const AWS_ID: &str = "AKIAIOSFODNN7EXAMPLE";
const AWS_SECRET: &str = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";

#[test]
fn every_shape_is_replaced_by_a_marker_naming_its_kind() {
    let r = shapes_only();
    let cases: &[(&str, &str, &str)] = &[
        // (text, the secret that must be gone, the kind in the marker)
        ("key id: AKIAIOSFODNN7EXAMPLE.", AWS_ID, "AWS access key id"),
        (
            "export AWS_SESSION=ASIAY34FZKBOKMUTVV7A done",
            "ASIAY34FZKBOKMUTVV7A",
            "AWS access key id",
        ),
        (
            "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\n",
            AWS_SECRET,
            "AWS secret access key",
        ),
        (
            r#"{"AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"}"#,
            AWS_SECRET,
            "AWS secret access key",
        ),
        (
            "{\"AccessKeyId\": \"ASIAY34FZKBOKMUTVV7A\", \"SecretAccessKey\": \"wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\",",
            AWS_SECRET,
            "AWS secret access key",
        ),
        (
            "awsSecretAccessKey: wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
            AWS_SECRET,
            "AWS secret access key",
        ),
        (
            "\"SessionToken\": \"IQoJb3JpZ2luX2VjEJr//////////wEaCXVzLWVhc3QtMSJHMEUCIQ\"",
            "IQoJb3JpZ2luX2VjEJr",
            "AWS session token",
        ),
        (
            "X-Api-Key: 0123456789abcdefABCDEF",
            "0123456789abcdefABCDEF",
            "API key header",
        ),
        (
            "token=ghp_0123456789abcdefghijABCDEFGHIJ012345 ok",
            GITHUB,
            "GitHub token",
        ),
        (
            "gho_0123456789abcdefghijABCDEFGHIJ012345",
            "gho_0123456789",
            "GitHub token",
        ),
        (
            "ghs_0123456789abcdefghijABCDEFGHIJ012345",
            "ghs_0123456789",
            "GitHub token",
        ),
        (
            "github_pat_11ABCDEFG0123456789abc_xyzXYZ0123456789abcdefABCDEF0123456789",
            "github_pat_11ABCDEFG",
            "GitHub token",
        ),
        (
            "ANTHROPIC_API_KEY=sk-ant-api03-abcdefghij0123456789ABCDEFGHIJ-_xyzAA",
            "sk-ant-api03-abcdefghij",
            "Anthropic API key",
        ),
        (
            "key: sk-proj-Ab12Cd34Ef56Gh78Ij90Kl12Mn34Op56",
            "sk-proj-Ab12",
            "OpenAI-style API key",
        ),
        (
            "\"sk-4f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c\"",
            "sk-4f9a8b7c6d5e",
            "OpenAI-style API key",
        ),
        (
            "stripe: sk_live_4eC39HqLyjWDarjtT1zdp7dc",
            "sk_live_4eC39HqLyjWDarjtT1zdp7dc",
            "Stripe key",
        ),
        (
            "rk_live_4eC39HqLyjWDarjtT1zdp7dc",
            "rk_live_4eC39",
            "Stripe key",
        ),
        (
            "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
            "whsec_MfKQ9r8",
            "Stripe webhook secret",
        ),
        (
            "SLACK=xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
            "xoxb-123456789012",
            "Slack token",
        ),
        (
            "url https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX",
            "T00000000/B00000000",
            "Slack webhook URL",
        ),
        (
            "maps key AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY here",
            "AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY",
            "Google API key",
        ),
        (
            "jwt eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U end",
            "eyJzdWIiOiIxMjM0NTY3ODkwIn0",
            "JSON web token",
        ),
        (
            "curl -H 'Authorization: Bearer abcDEF0123456789ghiJKL.mno-pqr_stu~v+w/x=='",
            "abcDEF0123456789ghiJKL",
            "bearer token",
        ),
        (
            "Authorization: Basic dXNlcjpodW50ZXIy",
            "dXNlcjpodW50ZXIy",
            "basic auth credentials",
        ),
        (
            "authorization: token 0123456789abcdef0123456789abcdef",
            "0123456789abcdef0123",
            "authorization header",
        ),
        (
            "x-api-key: 0123456789abcdefABCDEF",
            "0123456789abcdefABCDEF",
            "API key header",
        ),
        (
            "origin\thttps://deploy:s3cr3t-pa55@git.example.com/repo.git (fetch)",
            "s3cr3t-pa55",
            "password in URL",
        ),
        (
            "DATABASE_URL=postgres://app:hunter2hunter2@db:5432/app",
            "hunter2hunter2",
            "password in URL",
        ),
    ];
    for (text, secret, kind) in cases {
        let out = redacted(&r, text);
        assert!(!out.contains(secret), "{secret:?} survived in {out:?}");
        assert!(
            out.contains(&format!("[redacted: {kind}]")),
            "{text:?} → {out:?}, expected the kind {kind:?}"
        );
    }
}

#[test]
fn what_surrounds_a_secret_stays() {
    let r = shapes_only();
    assert_eq!(
        redacted(&r, &format!("before {GITHUB} after")),
        "before [redacted: GitHub token] after"
    );
    // Only the credential of a header or a URL goes; the name and the host stay.
    assert_eq!(
        redacted(&r, "Authorization: Bearer abcDEF0123456789ghiJKL\n"),
        "Authorization: Bearer [redacted: bearer token]\n"
    );
    assert_eq!(
        redacted(
            &r,
            "aws_secret_access_key=\"wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\""
        ),
        "aws_secret_access_key=\"[redacted: AWS secret access key]\""
    );
    assert_eq!(
        redacted(&r, "https://me:pa55word@example.com/x"),
        "https://me:[redacted: password in URL]@example.com/x"
    );
    // Several secrets in one text, multi-byte text around them.
    assert_eq!(
        redacted(&r, &format!("é {AWS_ID} ü {GITHUB} ö")),
        "é [redacted: AWS access key id] ü [redacted: GitHub token] ö"
    );
}

#[test]
fn a_private_key_block_goes_whole_even_when_its_end_was_cut_off() {
    let r = shapes_only();
    for header in [
        "RSA PRIVATE KEY",
        "PRIVATE KEY",
        "OPENSSH PRIVATE KEY",
        "EC PRIVATE KEY",
        "ENCRYPTED PRIVATE KEY",
        "PGP PRIVATE KEY BLOCK",
    ] {
        let text = format!(
            "id_key:\n-----BEGIN {header}-----\nMIIEpAIBAAKCAQEA7bq\nb3BlbnNzaC1rZXktdjE=\n-----END {header}-----\nafter\n"
        );
        assert_eq!(
            redacted(&r, &text),
            "id_key:\n[redacted: private key block]\nafter\n",
            "{header}"
        );
    }
    let cut = "key:\n-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\nAAAAB";
    assert_eq!(redacted(&r, cut), "key:\n[redacted: private key block]");
    // Two blocks: each up to its own END, what is between them stays.
    let two = "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\nmiddle\n\
               -----BEGIN PRIVATE KEY-----\nBBBB\n-----END PRIVATE KEY-----";
    assert_eq!(
        redacted(&r, two),
        "[redacted: private key block]\nmiddle\n[redacted: private key block]"
    );
    // A public key or a certificate is not a secret.
    let public = "-----BEGIN PUBLIC KEY-----\nMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE\n-----END PUBLIC KEY-----\n\
                  -----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIU\n-----END CERTIFICATE-----";
    assert_eq!(r.redact_text(public), None);
}

#[test]
fn known_values_are_named_by_their_variable() {
    let r = Redact::new([
        (
            "OPENAI_API_KEY".to_owned(),
            " local-key-Zq8XvT41mNw\n".to_owned(),
        ),
        ("SHORT_KEY".to_owned(), "x".to_owned()),
        ("TOKEN_7".to_owned(), "1234567".to_owned()),
        ("EMPTY".to_owned(), String::new()),
        ("SAME_AGAIN".to_owned(), "local-key-Zq8XvT41mNw".to_owned()),
        ("ODD".to_owned(), "a.b*c+d?(e)[f]{g}|h^$\\ é".to_owned()),
    ]);
    assert_eq!(
        redacted(&r, "key=local-key-Zq8XvT41mNw;again local-key-Zq8XvT41mNw"),
        "key=[redacted: OPENAI_API_KEY];again [redacted: OPENAI_API_KEY]"
    );
    // Regex metacharacters in a value are matched literally.
    assert_eq!(
        redacted(&r, "v=a.b*c+d?(e)[f]{g}|h^$\\ é!"),
        "v=[redacted: ODD]!"
    );
    assert_eq!(r.redact_text("v=aXb*c+d?(e)[f]{g}|h^$\\ é"), None);
    // Values under eight characters would shred ordinary output: ignored.
    assert_eq!(r.redact_text("x marks 1234567 spots"), None);
    assert!(format!("{r:?}").contains("known_values: 2"), "{r:?}");
    assert!(
        !format!("{r:?}").contains("local-key"),
        "Debug never shows a value"
    );
}

#[test]
fn a_known_value_with_a_shape_is_named_by_its_variable() {
    let key = "sk-proj-Ab12Cd34Ef56Gh78Ij90Kl12Mn34Op56";
    let r = Redact::new([("OPENAI_API_KEY".to_owned(), key.to_owned())]);
    assert_eq!(
        redacted(&r, &format!("k={key}")),
        "k=[redacted: OPENAI_API_KEY]"
    );
    // Another key of the same shape keeps the shape's name.
    assert_eq!(
        redacted(&r, "k=sk-proj-Zz99Yy88Xx77Ww66Vv55Uu44Tt33"),
        "k=[redacted: OpenAI-style API key]"
    );
}

#[test]
fn ordinary_text_hashes_and_code_pass_untouched() {
    let r = shapes_only();
    for text in [
        // a git SHA, a SHA-256, a UUID, a base64 blob with no prefix
        "commit 9a71a7f3c2d4e5f60718293a4b5c6d7e8f901234",
        "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        "id 123e4567-e89b-12d3-a456-426614174000",
        "data: QUtJQUlPU0ZPRE5ON0VYQU1QTEVxd2VydHl1aW9wYXNkZmdoamts/+ZmRzYQ==",
        // code that names credentials without holding one
        "let token = std::env::var(\"GITHUB_TOKEN\")?;\nheaders.insert(\"Authorization\", format!(\"Bearer {token}\"));",
        "aws_secret_access_key = os.environ[\"AWS_SECRET_ACCESS_KEY\"]",
        "curl -H \"Authorization: Bearer $TOKEN\" -H 'x-api-key: ${API_KEY}' https://api.example.com",
        "Authorization: Bearer <token>",
        "the bearer of bad news; the Bearer scheme",
        "-----BEGIN PRIVATE KEY",
        // kebab-case names after `sk-`, prefixes inside longer words
        "class=\"sk-button-primary-large-variant\" task-runner-configuration-file",
        "XAKIAIOSFODNN7EXAMPLE AKIAIOSFODNN7EXAMPLEX",
        "ghp_short ghp-0123456789abcdefghijABCDEFGHIJ012345",
        "https://example.com:8080/path git@github.com:org/repo.git ssh://git@host:22/x",
        "fn main() { println!(\"héllo wörld\"); }",
        "",
    ] {
        assert_eq!(r.redact_text(text), None, "{text:?}");
    }
}

/// A rejected match is searched again from its next character: a text of nothing but near
/// misses must still take one pass, not one per position (this would run for hours).
#[test]
fn near_misses_do_not_make_the_search_quadratic() {
    let r = shapes_only();
    // No digit: no match at all. A digit but too short: matched, then rejected.
    for text in ["sk-".repeat(100_000), "sk-abc1 ".repeat(40_000)] {
        assert!(r.redact_text(&text).is_none(), "{}", &text[..40]);
    }
}

#[test]
fn the_structured_value_is_redacted_everywhere_and_left_alone_when_clean() {
    let r = shapes_only();
    let clean = json!({"exit_code": 0, "lines": ["a", "b", {"k": [1, null, true]}]});
    assert_eq!(r.redact_value(&clean), None);
    let value = json!({
        "exit_code": 0,
        "stdout": format!("token {GITHUB}"),
        "nested": [1, "plain", {"deep": [AWS_ID]}],
        GITHUB: "a key that is a secret",
    });
    let out = r.redact_value(&value).unwrap();
    assert_eq!(
        out,
        json!({
            "exit_code": 0,
            "stdout": "token [redacted: GitHub token]",
            "nested": [1, "plain", {"deep": ["[redacted: AWS access key id]"]}],
            "[redacted: GitHub token]": "a key that is a secret",
        })
    );
    assert!(!out.to_string().contains("ghp_0123"));
}

#[test]
fn the_scrubber_is_the_same_redaction() {
    let r = Redact::new([("MY_TOKEN".to_owned(), "tok-0123456789".to_owned())]);
    let scrub = r.scrubber();
    assert_eq!(scrub("plain"), None);
    assert_eq!(
        scrub("a tok-0123456789 b").as_deref(),
        Some("a [redacted: MY_TOKEN] b")
    );
}

#[test]
fn every_shape_compiles_and_none_matches_the_empty_text() {
    for s in SHAPES {
        let re = Regex::new(s.pattern).unwrap_or_else(|e| panic!("{}: {e}", s.kind));
        assert!(re.find("").is_none(), "{}", s.kind);
        assert_eq!(
            re.captures_len() > 1,
            s.group,
            "{}: a group shape has a group",
            s.kind
        );
    }
    assert!(matches!(*shapes_only().matcher, Matcher::Ready { .. }));
}
