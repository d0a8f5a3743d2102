//! YCSB's core workloads A to F, as its `workloads/workloada` to `workloadf` define them: the
//! mix of operations, how requests pick their records, and the order YCSB runs them in.

use clap::ValueEnum;

/// One of YCSB's core workloads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum CoreWorkload {
    A,
    B,
    C,
    D,
    E,
    F,
}

/// How a workload's requests pick their records (`requestdistribution`).
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestDistribution {
    /// YCSB's scrambled Zipfian: a few records, spread over the key space, take most requests.
    Zipfian,
    /// Every record alike.
    Uniform,
    /// The newest records the most popular (YCSB's skewed latest).
    Latest,
}

impl RequestDistribution {
    pub fn name(self) -> &'static str {
        match self {
            RequestDistribution::Zipfian => "zipfian",
            RequestDistribution::Uniform => "uniform",
            RequestDistribution::Latest => "latest",
        }
    }
}

/// The shares of a workload's operations, adding up to 1.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Mix {
    pub read: f64,
    pub update: f64,
    pub insert: f64,
    pub scan: f64,
    pub read_modify_write: f64,
}

/// One operation of a workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    Read,
    Update,
    Insert,
    Scan,
    ReadModifyWrite,
}

impl Operation {
    pub const ALL: [Operation; 5] = [
        Operation::Read,
        Operation::Update,
        Operation::Insert,
        Operation::Scan,
        Operation::ReadModifyWrite,
    ];

    /// The name YCSB reports it under, in lower case.
    pub fn name(self) -> &'static str {
        match self {
            Operation::Read => "read",
            Operation::Update => "update",
            Operation::Insert => "insert",
            Operation::Scan => "scan",
            Operation::ReadModifyWrite => "read_modify_write",
        }
    }

    pub fn index(self) -> usize {
        self as usize
    }
}

/// YCSB's `maxscanlength`: workload E's scans read 1 to 100 records (`scanlengthdistribution`
/// uniform).
pub const MAX_SCAN_LENGTH: u64 = 100;

impl CoreWorkload {
    /// Every workload, in the order YCSB runs them after the load: D and E insert records,
    /// so they come last, and D before E, whose scans then also meet D's inserts.
    pub const STANDARD_ORDER: [CoreWorkload; 6] = [
        CoreWorkload::A,
        CoreWorkload::B,
        CoreWorkload::C,
        CoreWorkload::F,
        CoreWorkload::D,
        CoreWorkload::E,
    ];

    /// `A` to `F` (either case).
    pub fn parse(text: &str) -> Result<CoreWorkload, String> {
        match text.trim().to_ascii_uppercase().as_str() {
            "A" => Ok(CoreWorkload::A),
            "B" => Ok(CoreWorkload::B),
            "C" => Ok(CoreWorkload::C),
            "D" => Ok(CoreWorkload::D),
            "E" => Ok(CoreWorkload::E),
            "F" => Ok(CoreWorkload::F),
            _ => Err(format!(
                "'{text}' is none of YCSB's core workloads: use letters A to F, such as A,B,C"
            )),
        }
    }

    pub fn letter(self) -> &'static str {
        match self {
            CoreWorkload::A => "A",
            CoreWorkload::B => "B",
            CoreWorkload::C => "C",
            CoreWorkload::D => "D",
            CoreWorkload::E => "E",
            CoreWorkload::F => "F",
        }
    }

    /// What the workload does, as its file describes it.
    pub fn description(self) -> &'static str {
        match self {
            CoreWorkload::A => "update heavy: 50% read, 50% update",
            CoreWorkload::B => "read mostly: 95% read, 5% update",
            CoreWorkload::C => "read only: 100% read",
            CoreWorkload::D => "read latest: 95% read, 5% insert",
            CoreWorkload::E => "short ranges: 95% scan of 1 to 100 records, 5% insert",
            CoreWorkload::F => "read-modify-write: 50% read, 50% read-modify-write",
        }
    }

    /// Its operations' shares (`readproportion`, `updateproportion`, ...).
    pub fn mix(self) -> Mix {
        let none = Mix {
            read: 0.0,
            update: 0.0,
            insert: 0.0,
            scan: 0.0,
            read_modify_write: 0.0,
        };
        match self {
            CoreWorkload::A => Mix {
                read: 0.5,
                update: 0.5,
                ..none
            },
            CoreWorkload::B => Mix {
                read: 0.95,
                update: 0.05,
                ..none
            },
            CoreWorkload::C => Mix { read: 1.0, ..none },
            CoreWorkload::D => Mix {
                read: 0.95,
                insert: 0.05,
                ..none
            },
            CoreWorkload::E => Mix {
                scan: 0.95,
                insert: 0.05,
                ..none
            },
            CoreWorkload::F => Mix {
                read: 0.5,
                read_modify_write: 0.5,
                ..none
            },
        }
    }

    /// Its `requestdistribution`.
    pub fn distribution(self) -> RequestDistribution {
        match self {
            CoreWorkload::D => RequestDistribution::Latest,
            _ => RequestDistribution::Zipfian,
        }
    }

    /// `workloads` without repeats, in [`STANDARD_ORDER`](Self::STANDARD_ORDER).
    pub fn in_standard_order(workloads: &[CoreWorkload]) -> Vec<CoreWorkload> {
        Self::STANDARD_ORDER
            .into_iter()
            .filter(|w| workloads.contains(w))
            .collect()
    }
}

impl Mix {
    /// The operation a uniform draw `u` in [0, 1) falls on (YCSB's `DiscreteGenerator`).
    pub fn pick(&self, u: f64) -> Operation {
        let shares = [
            (Operation::Read, self.read),
            (Operation::Update, self.update),
            (Operation::Insert, self.insert),
            (Operation::Scan, self.scan),
            (Operation::ReadModifyWrite, self.read_modify_write),
        ];
        let mut below = 0.0;
        let mut last = Operation::Read;
        for (operation, share) in shares {
            if share <= 0.0 {
                continue;
            }
            below += share;
            last = operation;
            if u < below {
                return operation;
            }
        }
        last
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workloads_parse_and_run_in_ycsbs_order() {
        let asked: Vec<CoreWorkload> = "e,D,a,F,c,B,a"
            .split(',')
            .map(|w| CoreWorkload::parse(w).unwrap())
            .collect();
        let letters: Vec<&str> = CoreWorkload::in_standard_order(&asked)
            .into_iter()
            .map(CoreWorkload::letter)
            .collect();
        assert_eq!(letters, ["A", "B", "C", "F", "D", "E"]);
        assert!(CoreWorkload::parse("G").unwrap_err().contains("A to F"));
    }

    #[test]
    fn mixes_add_up_and_pick_by_share() {
        for w in CoreWorkload::STANDARD_ORDER {
            let m = w.mix();
            let total = m.read + m.update + m.insert + m.scan + m.read_modify_write;
            assert!((total - 1.0).abs() < 1e-12, "{w:?}");
        }
        let b = CoreWorkload::B.mix();
        assert_eq!(b.pick(0.0), Operation::Read);
        assert_eq!(b.pick(0.949), Operation::Read);
        assert_eq!(b.pick(0.951), Operation::Update);
        assert_eq!(b.pick(0.999_999), Operation::Update);
        assert_eq!(CoreWorkload::C.mix().pick(0.999), Operation::Read);
        let e = CoreWorkload::E.mix();
        // Shares in YCSB's order: read, update, insert, scan, read-modify-write.
        assert_eq!(e.pick(0.02), Operation::Insert);
        assert_eq!(e.pick(0.5), Operation::Scan);
        assert_eq!(e.pick(0.97), Operation::Scan);
        let f = CoreWorkload::F.mix();
        assert_eq!(f.pick(0.7), Operation::ReadModifyWrite);
        assert_eq!(CoreWorkload::D.distribution(), RequestDistribution::Latest);
        assert_eq!(CoreWorkload::E.distribution(), RequestDistribution::Zipfian);
    }
}
