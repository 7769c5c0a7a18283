//! The scaling view's measurement runner: progress, measured peaks, cancel, and the rule
//! that skips the naive path where its n x n scores would not fit. The counting allocator
//! is installed for the whole binary (main.rs).

use std::sync::atomic::{AtomicBool, Ordering};

use attnviz::engine::limits::MAX_NAIVE_SCORE_BYTES;
use attnviz::engine::scaling::heap;

use crate::turn;
use attnviz::engine::scaling::{
    self, KernelKind, Measurement, Plan, Progress, Skip, naive_bytes, naive_skip,
};

const GB: u64 = 1_000_000_000;

fn small_plan(ns: Vec<usize>) -> Plan {
    Plan {
        ns,
        d: 16,
        kernels: vec![KernelKind::Naive, KernelKind::Flash],
        flash_threads: Some(1),
        seed: 1,
        available_bytes: Some(16 * GB),
        flash_slice_rows: 64,
    }
}

fn collect(plan: &Plan, mut stop_when: impl FnMut(&Progress) -> bool) -> Vec<Progress> {
    let cancel = AtomicBool::new(false);
    let mut seen = Vec::new();
    scaling::run(plan, &cancel, &mut |p| {
        if stop_when(&p) {
            cancel.store(true, Ordering::Relaxed);
        }
        seen.push(p);
    });
    seen
}

#[test]
fn the_counting_allocator_sees_a_big_allocation() {
    let _turn = turn();
    assert!(heap::installed());
    let (v, peak) = heap::measure(|| vec![1u8; 3 << 20]);
    assert_eq!(v.len(), 3 << 20);
    // The counters are process-wide and the test harness's own threads allocate and
    // free (captured output, finished tests) while this runs, so the peak above the
    // baseline can fall short of 3 MiB by what they freed meanwhile: allow 256 KiB.
    assert!(peak.unwrap() >= (3 << 20) - (256 << 10), "{peak:?}");
}

#[test]
fn a_sweep_reports_every_job_in_order_with_measured_peaks() {
    let _turn = turn();
    let plan = small_plan(vec![128, 256]);
    let seen = collect(&plan, |_| false);
    let Progress::Started {
        jobs,
        heap_metered,
        flash_threads,
        ..
    } = &seen[0]
    else {
        panic!("first report: {:?}", seen[0]);
    };
    assert_eq!(jobs.len(), 4);
    assert!(*heap_metered);
    assert_eq!(*flash_threads, 1);
    assert_eq!(seen.last(), Some(&Progress::Finished { cancelled: false }));

    let samples: Vec<_> = seen
        .iter()
        .filter_map(|p| match p {
            Progress::Measured { job, sample } => Some((*job, sample.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(
        samples.iter().map(|s| s.0).collect::<Vec<_>>(),
        [0, 1, 2, 3]
    );
    for (job, s) in &samples {
        assert_eq!((s.kernel, s.n), (jobs[*job].kernel, jobs[*job].n));
        assert!(s.ms > 0.0 && s.runs >= 1);
    }
    // The naive path holds its n x n scores: the measured peak is at least that.
    let naive_256 = &samples[2].1;
    assert_eq!(naive_256.kernel, KernelKind::Naive);
    assert!(naive_256.peak_bytes.unwrap() >= 256 * 256 * 4);
    // The flash kernel holds O(n d): far less at the same n.
    let flash_256 = &samples[3].1;
    assert!(flash_256.tier.is_some());
    assert!(flash_256.peak_bytes.unwrap() < naive_256.peak_bytes.unwrap());

    // Progress within the flash runs: 256 rows in slices of 64 report 1/4 ... 4/4.
    let fractions: Vec<f64> = seen
        .iter()
        .filter_map(|p| match p {
            Progress::Working { job: 3, fraction } => Some(*fraction),
            _ => None,
        })
        .collect();
    assert_eq!(fractions, [0.0, 0.25, 0.5, 0.75, 1.0]);
}

#[test]
fn cancel_between_runs_stops_the_sweep() {
    let _turn = turn();
    let plan = small_plan(vec![64, 128, 256, 512]);
    let seen = collect(&plan, |p| matches!(p, Progress::Measured { .. }));
    let measured = seen
        .iter()
        .filter(|p| matches!(p, Progress::Measured { .. }))
        .count();
    assert_eq!(measured, 1, "{seen:?}");
    assert_eq!(seen.last(), Some(&Progress::Finished { cancelled: true }));
}

#[test]
fn cancel_inside_a_flash_run_stops_at_the_next_slice() {
    let _turn = turn();
    let plan = Plan {
        kernels: vec![KernelKind::Flash],
        ..small_plan(vec![1024])
    };
    let seen = collect(
        &plan,
        |p| matches!(p, Progress::Working { fraction, .. } if *fraction > 0.0),
    );
    let working: Vec<_> = seen
        .iter()
        .filter(|p| matches!(p, Progress::Working { .. }))
        .collect();
    // The start, one slice of 64 of 1024 rows, then nothing more.
    assert_eq!(working.len(), 2, "{seen:?}");
    assert!(!seen.iter().any(|p| matches!(p, Progress::Measured { .. })));
    assert_eq!(seen.last(), Some(&Progress::Finished { cancelled: true }));
}

#[test]
fn a_measurement_thread_reports_over_its_channel_and_cancels() {
    let _turn = turn();
    let plan = small_plan(vec![64, 128, 256, 512, 1024, 2048]);
    let m = Measurement::start(plan).unwrap();
    let mut seen = Vec::new();
    while let Some(p) = m.recv() {
        if matches!(p, Progress::Measured { .. })
            && !seen.iter().any(|q| matches!(q, Progress::Measured { .. }))
        {
            m.cancel();
        }
        let end = matches!(p, Progress::Finished { .. });
        seen.push(p);
        if end {
            break;
        }
    }
    assert!(matches!(seen[0], Progress::Started { .. }));
    assert_eq!(seen.last(), Some(&Progress::Finished { cancelled: true }));
    let measured = seen
        .iter()
        .filter(|p| matches!(p, Progress::Measured { .. }))
        .count();
    assert!(
        measured < 12,
        "cancel stopped the sweep early: {measured} of 12 measured"
    );
    m.join();
}

#[test]
fn the_naive_path_is_skipped_where_its_scores_would_not_fit() {
    let _turn = turn();
    let plenty = Some(1000 * GB);
    assert_eq!(naive_skip(8192, 64, plenty), None);
    assert_eq!(
        naive_skip(16384, 64, plenty),
        Some(Skip::OverLimit {
            need: 16384 * 16384 * 4,
            limit: MAX_NAIVE_SCORE_BYTES
        })
    );
    // Not enough memory is the reason given first, even under the limit.
    let tight = Some(50_000_000);
    assert_eq!(
        naive_skip(4096, 64, tight),
        Some(Skip::NoMemory {
            need: 4096 * 4096 * 4,
            available: 50_000_000
        })
    );
    assert_eq!(naive_skip(2048, 64, tight), None);
    // The scores and the output both count.
    let exact = naive_bytes(1024, 64);
    assert_eq!(naive_skip(1024, 64, Some(exact)), None);
    assert!(matches!(
        naive_skip(1024, 64, Some(exact - 1)),
        Some(Skip::NoMemory { .. })
    ));
    // Without a reading of the machine, only the limit applies.
    assert_eq!(naive_skip(8192, 64, None), None);
    assert!(matches!(
        naive_skip(131_072, 64, None),
        Some(Skip::OverLimit { .. })
    ));
    // LLaMA-scale n on a 22 GB machine: 68.7 GB of scores.
    let msg = naive_skip(131_072, 64, Some(22 * GB)).unwrap().to_string();
    assert_eq!(
        msg,
        "its n x n scores need 68.7 GB, more than the 22.0 GB available"
    );
}

#[test]
fn a_sweep_skips_the_naive_runs_that_would_not_fit_and_still_measures_flash() {
    let _turn = turn();
    let plan = Plan {
        available_bytes: Some(200_000),
        ..small_plan(vec![64, 256])
    };
    let seen = collect(&plan, |_| false);
    let skipped: Vec<_> = seen
        .iter()
        .filter_map(|p| match p {
            Progress::Skipped { job, reason } => Some((*job, *reason)),
            _ => None,
        })
        .collect();
    // 256 x 256 x 4 B = 262 kB of scores do not fit in 200 kB; 64 x 64 do.
    assert_eq!(
        skipped,
        [(
            2,
            Skip::NoMemory {
                need: 256 * 256 * 4,
                available: 200_000
            }
        )]
    );
    let flash_jobs: Vec<usize> = seen
        .iter()
        .filter_map(|p| match p {
            Progress::Measured { job, sample } if sample.kernel == KernelKind::Flash => Some(*job),
            _ => None,
        })
        .collect();
    assert_eq!(flash_jobs, [1, 3]);
}

#[test]
fn a_bad_plan_is_reported_not_run() {
    let _turn = turn();
    let plan = Plan {
        d: 0,
        ..small_plan(vec![64])
    };
    let seen = collect(&plan, |_| false);
    assert!(matches!(&seen[1], Progress::Failed { message, .. } if message.contains("d is 0")));
    assert_eq!(seen.last(), Some(&Progress::Finished { cancelled: false }));
}
