//! The readers of user input never panic: the .npy reader on random bytes and on
//! mutations of valid files (flipped bytes, truncations, edited headers), and the mask
//! and position-encoding parsers on random strings. Each gives a value or an error with
//! exit code 2.

use attnviz::engine::config::{MaskKind, PeKind};
use attnviz::engine::mask::Mask;
use attnviz::engine::npy;
use proptest::prelude::*;

fn valid_npy(rows: usize, cols: usize, f64s: bool) -> Vec<u8> {
    let mut bytes = Vec::new();
    use ndarray_npy::WriteNpyExt;
    if f64s {
        ndarray::Array2::<f64>::from_elem((rows, cols), 0.5)
            .write_npy(&mut bytes)
            .unwrap();
    } else {
        ndarray::Array2::<f32>::from_elem((rows, cols), 0.5)
            .write_npy(&mut bytes)
            .unwrap();
    }
    bytes
}

fn read_bytes(bytes: &[u8]) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.npy");
    std::fs::write(&path, bytes).unwrap();
    if let Err(e) = npy::read(&path) {
        prop_assert_eq!(e.exit_code(), 2, "{}", e);
        prop_assert!(e.to_string().contains("t.npy"), "{}", e);
    }
    // A file mask goes through the same reader.
    let kind: MaskKind = format!("file:{}", path.display()).parse().unwrap();
    if let Err(e) = Mask::resolve(&kind, 1, 1, 3, 4) {
        prop_assert_eq!(e.exit_code(), 2, "{}", e);
    }
    Ok(())
}

#[derive(Debug, Clone)]
enum Mutation {
    Flip { at: usize, xor: u8 },
    Truncate(usize),
    Header(String),
    Insert { at: usize, byte: u8 },
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), 1u8..=255).prop_map(|(at, xor)| Mutation::Flip { at, xor }),
        any::<usize>().prop_map(Mutation::Truncate),
        prop_oneof![
            Just("{'descr': '<f4', 'fortran_order': True, 'shape': (3, 4), }".to_string()),
            Just(
                "{'descr': '<f8', 'fortran_order': False, 'shape': (99999999999, 99999999999), }"
                    .to_string()
            ),
            Just("{'descr': '<f4', 'fortran_order': False, 'shape': (-1, 4), }".to_string()),
            Just("{'descr': '>f4', 'fortran_order': False, 'shape': (), }".to_string()),
            Just("{'descr': '<i8', 'fortran_order': False, 'shape': (3,), }".to_string()),
            Just("{'descr': '<f4', 'shape': (3, 4), }".to_string()),
            "[ -~]{0,80}",
        ]
        .prop_map(Mutation::Header),
        (any::<usize>(), any::<u8>()).prop_map(|(at, byte)| Mutation::Insert { at, byte }),
    ]
}

fn apply(mut bytes: Vec<u8>, m: &Mutation) -> Vec<u8> {
    match m {
        Mutation::Flip { at, xor } => {
            let i = at % bytes.len();
            bytes[i] ^= xor;
        }
        Mutation::Truncate(n) => bytes.truncate(n % (bytes.len() + 1)),
        Mutation::Insert { at, byte } => {
            let i = at % (bytes.len() + 1);
            bytes.insert(i, *byte);
        }
        Mutation::Header(h) => {
            // Magic, version 1.0, a 2-byte header length, the header, the old data.
            let data_start = 10 + u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
            let mut header = h.clone().into_bytes();
            while (10 + header.len() + 1) % 64 != 0 {
                header.push(b' ');
            }
            header.push(b'\n');
            let mut out = bytes[..8].to_vec();
            out[6] = 1;
            out[7] = 0;
            out.extend((header.len() as u16).to_le_bytes());
            out.extend(header);
            out.extend(&bytes[data_start.min(bytes.len())..]);
            bytes = out;
        }
    }
    bytes
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 300,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn npy_reader_never_panics_on_random_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        read_bytes(&bytes)?;
        // Random bytes behind a valid magic string reach the header parser.
        let mut magic = b"\x93NUMPY\x01\x00".to_vec();
        magic.extend(&bytes);
        read_bytes(&magic)?;
    }

    #[test]
    fn npy_reader_never_panics_on_mutated_files(
        rows in 1usize..5,
        cols in 1usize..5,
        f64s in any::<bool>(),
        ms in proptest::collection::vec(mutation(), 1..4),
    ) {
        let mut bytes = valid_npy(rows, cols, f64s);
        for m in &ms {
            if bytes.len() < 10 {
                break;
            }
            bytes = apply(bytes, m);
        }
        read_bytes(&bytes)?;
    }

    #[test]
    fn mask_parser_never_panics(s in "\\PC{0,40}", t in "(none|causal|window|padding|bigbird|file)(:[0-9,\\-x .e]{0,20})?") {
        for text in [&s, &t] {
            if let Ok(kind) = text.parse::<MaskKind>() {
                // A parsed kind resolves or says why not, for any shape.
                for (b, h, nq, nk) in [(1, 1, 1, 1), (2, 3, 5, 7), (1, 2, 9, 4)] {
                    if let Err(e) = Mask::resolve(&kind, b, h, nq, nk) {
                        prop_assert_eq!(e.exit_code(), 2, "{}: {}", text, e);
                    }
                }
            }
        }
    }

    #[test]
    fn pe_parser_never_panics(s in "\\PC{0,40}", t in "(none|sinusoidal|sin|learned|rope|alibi)(:[0-9\\-.e]{0,12})?") {
        for text in [&s, &t] {
            if let Ok(PeKind::Rope { base }) = text.parse::<PeKind>() {
                prop_assert!(base.is_finite() && base > 1.0, "{}: base {}", text, base);
            }
        }
    }
}
