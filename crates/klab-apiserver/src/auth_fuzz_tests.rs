//! Property tests of bearer authentication: random strings, mutations of a real token (flipped,
//! truncated, reordered, re-encoded), and well-formed tokens that must still fail (signed by
//! another key, expired, not yet valid, wrong audience or issuer, `alg: none`, an unknown or
//! replaced service account). Every one is answered 401 with upstream's Status, nothing panics,
//! and the one real token keeps working throughout (so the test can fail).

use axum::body::Body;
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use serde_json::{Value, json};
use tower::ServiceExt;

use crate::ApiServer;
use crate::token::{self, Signer};

const UNAUTHORIZED: &str = r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Unauthorized","reason":"Unauthorized","code":401}"#;

async fn get_with(api: &ApiServer, bearer: &str) -> (u16, String) {
    let req = axum::http::Request::builder()
        .uri("/api/v1/namespaces/default/pods")
        .header("authorization", format!("Bearer {bearer}"))
        .body(Body::empty())
        .expect("a visible-ASCII header value");
    let resp = api.router().oneshot(req).await.expect("infallible");
    let code = resp.status().as_u16();
    let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
        .await
        .unwrap_or_default();
    (code, String::from_utf8_lossy(&bytes).into_owned())
}

async fn admin(api: &ApiServer, method: &str, uri: &str, body: Value) -> Value {
    let req = axum::http::Request::builder()
        .method(method)
        .uri(uri)
        .header("content-type", "application/json")
        .body(Body::from(body.to_string()))
        .unwrap();
    let resp = api.router().oneshot(req).await.unwrap();
    let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
        .await
        .unwrap();
    serde_json::from_slice(&bytes).unwrap()
}

fn b64(v: &Value) -> String {
    URL_SAFE_NO_PAD.encode(v.to_string())
}

/// A forged token: `header.claims.signature` with arbitrary parts.
fn forged(header: &Value, claims: &Value, sig: &[u8]) -> String {
    format!(
        "{}.{}.{}",
        b64(header),
        b64(claims),
        URL_SAFE_NO_PAD.encode(sig)
    )
}

#[derive(Debug, Clone)]
enum Input {
    Random(String),
    Flip(usize, u8),
    Truncate(usize),
    DropPart(usize),
    Padded(usize),
    SwapParts,
    OtherKey([u8; 32]),
    Expired(i64),
    NotYetValid(i64),
    Audience(String),
    Issuer(String),
    AlgNone,
    UnknownAccount(String),
    Claims(Value),
}

fn json_leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        "[ -~]{0,12}".prop_map(Value::from),
    ]
}

fn input() -> impl Strategy<Value = Input> {
    prop_oneof![
        "[!-~]{0,200}".prop_map(Input::Random),
        (any::<usize>(), 0x21u8..0x7f).prop_map(|(i, c)| Input::Flip(i, c)),
        any::<usize>().prop_map(Input::Truncate),
        (0usize..3).prop_map(Input::DropPart),
        (1usize..4).prop_map(Input::Padded),
        Just(Input::SwapParts),
        any::<[u8; 32]>().prop_map(Input::OtherKey),
        (1i64..i64::MAX).prop_map(Input::Expired),
        (1i64..i64::MAX).prop_map(Input::NotYetValid),
        "[a-z:./]{0,20}".prop_map(Input::Audience),
        "[a-z:./]{0,20}".prop_map(Input::Issuer),
        Just(Input::AlgNone),
        "[a-z]{1,10}".prop_map(Input::UnknownAccount),
        proptest::collection::btree_map("[a-z.]{1,12}", json_leaf(), 0..6)
            .prop_map(|m| Input::Claims(Value::Object(m.into_iter().collect()))),
    ]
}

/// The token `input` describes, derived from the real one (`good`, with its claims).
fn token_for(api: &ApiServer, good: &str, claims: &Value, input: &Input) -> String {
    let parts: Vec<&str> = good.split('.').collect();
    let signer = &api.inner.signer;
    let header =
        || -> Value { serde_json::from_slice(&URL_SAFE_NO_PAD.decode(parts[0]).unwrap()).unwrap() };
    let with = |f: &dyn Fn(&mut Value)| {
        let mut c = claims.clone();
        f(&mut c);
        signer.sign(&c)
    };
    match input {
        Input::Random(s) => s.clone(),
        Input::Flip(i, c) => {
            let mut b = good.as_bytes().to_vec();
            let i = i % b.len();
            // A flip to the same byte would leave the real token.
            b[i] = if b[i] == *c { b'!' } else { *c };
            String::from_utf8(b).unwrap()
        }
        Input::Truncate(i) => good[..i % good.len()].to_string(),
        Input::DropPart(i) => {
            let mut p = parts.clone();
            p.remove(*i);
            p.join(".")
        }
        Input::Padded(n) => format!("{}{}", good, "=".repeat(*n)),
        Input::SwapParts => format!("{}.{}.{}", parts[1], parts[0], parts[2]),
        Input::OtherKey(seed) => Signer::from_seed(seed).sign(claims),
        Input::Expired(ago) => {
            let now = api.inner.clock.now().as_second();
            with(&|c| c["exp"] = json!(now.saturating_sub(*ago).min(now)))
        }
        Input::NotYetValid(ahead) => {
            let now = api.inner.clock.now().as_second();
            with(&|c| c["nbf"] = json!(now.saturating_add(*ahead).max(now.saturating_add(1))))
        }
        Input::Audience(a) => with(&|c| c["aud"] = json!([a])),
        Input::Issuer(i) => with(&|c| c["iss"] = json!(i)),
        Input::AlgNone => {
            let mut h = header();
            h["alg"] = json!("none");
            format!("{}.{}.", b64(&h), parts[1])
        }
        Input::UnknownAccount(name) => with(&|c| {
            c["kubernetes.io"]["serviceaccount"]["name"] = json!(format!("x{name}"));
            c["sub"] = json!(format!("system:serviceaccount:default:x{name}"));
        }),
        // Arbitrary claims (no issuer, no service account), correctly signed; and the real
        // claims under a forged signature.
        Input::Claims(c) if c.as_object().is_some_and(|m| m.len() % 2 == 0) => signer.sign(c),
        Input::Claims(_) => forged(&header(), claims, b"not a signature"),
    }
}

#[test]
fn malformed_forged_and_stale_bearer_tokens_are_always_401() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap();
    let (api, good) = rt.block_on(async {
        let api = crate::testing::memory_server().await;
        admin(
            &api,
            "POST",
            "/api/v1/namespaces/default/serviceaccounts",
            json!({"metadata": {"name": "robot"}}),
        )
        .await;
        let tr = admin(
            &api,
            "POST",
            "/api/v1/namespaces/default/serviceaccounts/robot/token",
            json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}}),
        )
        .await;
        let good = tr["status"]["token"].as_str().expect("a token").to_string();
        (api, good)
    });
    let claims = api
        .inner
        .signer
        .verify(&good, api.inner.clock.now().as_second())
        .expect("the real token verifies");
    assert_eq!(claims["iss"], token::ISSUER);
    let mut runner = TestRunner::new(Config {
        cases: 600,
        failure_persistence: None,
        ..Config::default()
    });
    let outcome = runner.run(&input(), |inp| {
        let token = token_for(&api, &good, &claims, &inp);
        prop_assume!(token != good);
        let (code, body) = rt.block_on(get_with(&api, &token));
        prop_assert_eq!(code, 401, "{:?} → {}", inp, body);
        prop_assert_eq!(body.as_str(), UNAUTHORIZED);
        Ok(())
    });
    if let Err(e) = outcome {
        panic!("{e}");
    }
    // The real token still authenticates: refused by RBAC (403 naming its user), not a 401.
    let (code, body) = rt.block_on(get_with(&api, &good));
    assert_eq!(code, 403, "{body}");
    assert!(
        body.contains(
            r#"User \"system:serviceaccount:default:robot\" cannot list resource \"pods\""#
        ),
        "{body}"
    );
}

/// Bootstrap-token-shaped bearer tokens: the real one's id with any other secret, any id with its
/// secret, random ids and secrets, one character changed, case flipped or a character added or
/// dropped — all 401 with upstream's Status, never a panic; the real one authenticates.
#[test]
fn wrong_bootstrap_tokens_are_always_401() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap();
    let api = rt.block_on(async {
        let api = crate::testing::memory_server().await;
        admin(
            &api,
            "POST",
            "/api/v1/namespaces/kube-system/secrets",
            json!({"metadata": {"name": "bootstrap-token-abcdef"}, "type": "bootstrap.kubernetes.io/token",
                "stringData": {"token-id": "abcdef", "token-secret": "0123456789abcdef",
                    "usage-bootstrap-authentication": "true"}}),
        )
        .await;
        api
    });
    let good = "abcdef.0123456789abcdef";
    let alnum = "[a-z0-9]";
    let strategy = prop_oneof![
        proptest::string::string_regex(&format!("abcdef\\.{alnum}{{16}}")).unwrap(),
        proptest::string::string_regex(&format!("{alnum}{{6}}\\.0123456789abcdef")).unwrap(),
        proptest::string::string_regex(&format!("{alnum}{{6}}\\.{alnum}{{16}}")).unwrap(),
        (0usize..23, proptest::char::range('\u{20}', '\u{7e}')).prop_map(|(i, c)| {
            let mut t: Vec<char> = good.chars().collect();
            t[i] = c;
            t.into_iter().collect::<String>()
        }),
        (0usize..23).prop_map(|i| {
            let mut t: Vec<char> = good.chars().collect();
            t[i] = t[i].to_ascii_uppercase();
            t.into_iter().collect::<String>()
        }),
        (0usize..24, proptest::char::range('a', 'z')).prop_map(|(i, c)| {
            let mut t: Vec<char> = good.chars().collect();
            t.insert(i, c);
            t.into_iter().collect::<String>()
        }),
        (0usize..23).prop_map(|i| {
            let mut t: Vec<char> = good.chars().collect();
            t.remove(i);
            t.into_iter().collect::<String>()
        }),
    ];
    let mut runner = TestRunner::new(Config {
        cases: 400,
        failure_persistence: None,
        ..Config::default()
    });
    let outcome = runner.run(&strategy, |token| {
        prop_assume!(token != good && !token.trim().is_empty() && token.trim() != good);
        let (code, body) = rt.block_on(get_with(&api, &token));
        prop_assert_eq!(code, 401, "{:?} → {}", token, body);
        prop_assert_eq!(body.as_str(), UNAUTHORIZED);
        Ok(())
    });
    if let Err(e) = outcome {
        panic!("{e}");
    }
    let (code, body) = rt.block_on(get_with(&api, good));
    assert_eq!(code, 403, "{body}");
    assert!(
        body.contains(r#"User \"system:bootstrap:abcdef\""#),
        "{body}"
    );
}
