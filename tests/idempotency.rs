//! Idempotency tokens match ctrlrun 0.12.2 for every row of the shared vectors.

use warden::effect::idempotency_token;

#[test]
fn every_idempotency_vector_matches_ctrlrun() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/vectors/ctrlrun-0.12.2/idempotency.json");
    let text = std::fs::read_to_string(path).expect("the shared vectors are beside the repository");
    let rows: Vec<serde_json::Value> = serde_json::from_str(&text).unwrap();
    assert!(rows.len() >= 12, "read {} rows", rows.len());
    for (index, row) in rows.iter().enumerate() {
        let key = row["effect_key"].as_str().unwrap();
        let attempt = u32::try_from(row["attempt"].as_u64().unwrap()).unwrap();
        assert_eq!(idempotency_token(key, attempt).unwrap(), row["token"].as_str().unwrap(), "row {index}");
    }
}

#[test]
fn a_token_needs_a_key_and_an_attempt_from_one() {
    assert!(idempotency_token("", 1).is_err());
    assert!(idempotency_token("k", 0).is_err());
}
