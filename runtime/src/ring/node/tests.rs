//! The link's statistics line with and without what the line under it counted.

use super::*;
use ::ring::endpoint::Stats;
use ::ring::link::LineStats;

fn stats() -> Stats {
    Stats {
        frames_sent: 7,
        bytes_sent: 3 << 10,
        frames_received: 5,
        bytes_received: 2 << 10,
        ..Default::default()
    }
}

#[test]
fn the_line_counts_follow_the_links() {
    let base = stats_line(&stats(), None);
    assert!(base.starts_with("ring: link sent 7 frames (3 KiB), received 5 (2 KiB);"));
    assert!(!base.contains("line:"));
    let irq = LineStats {
        by_irq: true,
        irq_bytes: 2100,
        irqs: 40,
        overruns: 3,
        dropped: 9,
    };
    let with = stats_line(&stats(), Some(irq));
    assert_eq!(
        with,
        format!("{base}; line: 2100 bytes received by interrupt (40 interrupts), 3 overruns, 9 dropped with the buffer full")
    );
    let polled = LineStats {
        overruns: 4,
        ..Default::default()
    };
    assert_eq!(
        stats_line(&stats(), Some(polled)),
        format!("{base}; line: polled, 4 overruns")
    );
}
