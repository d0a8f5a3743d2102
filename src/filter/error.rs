use std::fmt;

/// Result alias for filter operations.
pub type Result<T> = std::result::Result<T, FilterError>;

/// What can go wrong building, combining or decoding a Bloom filter.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum FilterError {
    /// The target is not a probability strictly between 0 and 1 (or is NaN).
    NotARate(f64),
    /// No row of the (extended) table reaches the target; `best` is the lowest rate on offer.
    UnreachableRate {
        /// The rate asked for.
        target: f64,
        /// The lowest rate on offer.
        best: f64,
    },
    /// Explicit parameters out of range.
    InvalidParams(String),
    /// Two filters combined with `union` / `intersect` differ in size or hash count.
    ShapeMismatch {
        /// The first filter's bits and hashes.
        left: (u64, u32),
        /// The second filter's bits and hashes.
        right: (u64, u32),
    },
    /// Two filters combined with `union` / `intersect` place keys by different hash
    /// algorithms (see the repository's filter notes): a filter read from an older file with a new one.
    HashMismatch {
        /// The first filter's hash algorithm.
        left: u16,
        /// The second filter's hash algorithm.
        right: u16,
    },
    /// `fold` asked for a factor that does not divide the filter's bit count into whole
    /// 64-bit words (or a factor of 0).
    CannotFold {
        /// The filter's bit count.
        bits: u64,
        /// The factor asked for.
        factor: u32,
    },
    /// Serialized bytes that are truncated, damaged or of an unknown format.
    Corrupt(String),
}

impl fmt::Display for FilterError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FilterError::NotARate(p) => write!(
                f,
                "false-positive rate {p} is not a rate: it must lie strictly between 0 and 1"
            ),
            FilterError::UnreachableRate { target, best } => write!(
                f,
                "false-positive rate {target:e} cannot be met: the lowest rate on offer is {best:e}"
            ),
            FilterError::InvalidParams(msg) => write!(f, "invalid filter parameters: {msg}"),
            FilterError::ShapeMismatch { left, right } => write!(
                f,
                "filters differ in shape: {} bits / {} hashes against {} bits / {} hashes",
                left.0, left.1, right.0, right.1
            ),
            FilterError::HashMismatch { left, right } => write!(
                f,
                "filters place keys by different hash algorithms: {left} against {right}"
            ),
            FilterError::CannotFold { bits, factor } => write!(
                f,
                "a filter of {bits} bits cannot be folded by {factor}: the factor must divide \
                 its {} words",
                bits / 64
            ),
            FilterError::Corrupt(msg) => write!(f, "corrupt serialized filter: {msg}"),
        }
    }
}

impl std::error::Error for FilterError {}
