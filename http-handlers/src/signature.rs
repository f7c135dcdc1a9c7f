//! Request signatures: HMAC-SHA256 over `"{timestamp}.{body}"` with the endpoint's secret.
//!
//! Every request carries `Deck-Timestamp` (Unix seconds) and `Deck-Signature: v1=<hex>`. A
//! receiver recomputes the HMAC over the timestamp, a dot and the raw body, compares in
//! constant time, and refuses a timestamp more than [`REPLAY_WINDOW_SECS`] away from its own
//! clock (a captured request cannot be replayed later). In Python:
//!
//! ```text
//! expected = hmac.new(secret, f"{ts}.".encode() + body, hashlib.sha256).hexdigest()
//! ok = hmac.compare_digest(f"v1={expected}", signature) and abs(time.time() - int(ts)) <= 300
//! ```

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// How far a request's timestamp may be from the receiver's clock, in seconds.
pub const REPLAY_WINDOW_SECS: i64 = 300;
/// The header with the Unix time the request was signed at.
pub const TIMESTAMP_HEADER: &str = "Deck-Timestamp";
/// The header with `v1=<hex HMAC-SHA256>`.
pub const SIGNATURE_HEADER: &str = "Deck-Signature";

type HmacSha256 = Hmac<Sha256>;

fn mac(secret: &[u8], timestamp: i64, body: &[u8]) -> HmacSha256 {
    // An HMAC takes a key of any length.
    let mut mac = HmacSha256::new_from_slice(secret).unwrap_or_else(|_| unreachable!());
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    mac
}

/// The `Deck-Signature` value for a body sent at `timestamp`.
pub fn sign(secret: &[u8], timestamp: i64, body: &[u8]) -> String {
    let bytes = mac(secret, timestamp, body).finalize().into_bytes();
    let mut hex = String::with_capacity(3 + bytes.len() * 2);
    hex.push_str("v1=");
    for b in bytes {
        hex.push_str(&format!("{b:02x}"));
    }
    hex
}

/// Why a request's signature was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    #[error("the Deck-Timestamp header is missing or not a number")]
    BadTimestamp,
    #[error("the request was signed {0} s away from this clock (more than 300 s): a replay?")]
    OutsideWindow(i64),
    #[error("the Deck-Signature header is missing or not v1=<hex>")]
    BadFormat,
    #[error("the signature does not match the body (wrong secret, or the body was changed)")]
    Mismatch,
}

/// Check a request as a receiver does: `timestamp` and `signature` as sent in the headers,
/// `body` the raw bytes, `now` the receiver's Unix time.
pub fn verify(
    secret: &[u8],
    timestamp: Option<&str>,
    signature: Option<&str>,
    body: &[u8],
    now: i64,
) -> Result<(), SignatureError> {
    let ts: i64 = timestamp
        .and_then(|t| t.trim().parse().ok())
        .ok_or(SignatureError::BadTimestamp)?;
    let skew = (now - ts).abs();
    if skew > REPLAY_WINDOW_SECS {
        return Err(SignatureError::OutsideWindow(skew));
    }
    let given = signature
        .and_then(|s| s.trim().strip_prefix("v1="))
        .and_then(decode_hex)
        .ok_or(SignatureError::BadFormat)?;
    mac(secret, ts, body)
        .verify_slice(&given)
        .map_err(|_| SignatureError::Mismatch)
}

fn decode_hex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signed_body_verifies_and_any_change_is_refused() {
        let secret = b"s3cret";
        let sig = sign(secret, 1_700_000_000, b"{\"a\":1}");
        assert!(sig.starts_with("v1=") && sig.len() == 3 + 64, "{sig}");
        let ok =
            |ts: &str, sig: &str, body: &[u8], now| verify(secret, Some(ts), Some(sig), body, now);
        assert_eq!(ok("1700000000", &sig, b"{\"a\":1}", 1_700_000_100), Ok(()));
        assert_eq!(
            ok("1700000000", &sig, b"{\"a\":2}", 1_700_000_000),
            Err(SignatureError::Mismatch)
        );
        assert_eq!(
            ok("1700000001", &sig, b"{\"a\":1}", 1_700_000_001),
            Err(SignatureError::Mismatch),
            "the timestamp is signed too"
        );
        assert_eq!(
            ok("1700000000", &sig, b"{\"a\":1}", 1_700_000_301),
            Err(SignatureError::OutsideWindow(301))
        );
        assert_eq!(
            verify(
                b"other",
                Some("1700000000"),
                Some(&sig),
                b"{\"a\":1}",
                1_700_000_000
            ),
            Err(SignatureError::Mismatch)
        );
        assert_eq!(
            ok("1700000000", "sha=abc", b"{}", 1_700_000_000),
            Err(SignatureError::BadFormat)
        );
        assert_eq!(
            verify(secret, None, Some(&sig), b"{}", 0),
            Err(SignatureError::BadTimestamp)
        );
    }

    #[test]
    fn agrees_with_python_hmac() {
        // hmac.new(b"key", b"0.The quick brown fox jumps over the lazy dog", sha256).hexdigest()
        assert_eq!(
            sign(b"key", 0, b"The quick brown fox jumps over the lazy dog"),
            "v1=8511f28f7a1949f0c42772b447d68b2daf760f5f0439a20a17e3b4e7cd395763"
        );
    }
}
