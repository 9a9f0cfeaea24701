//! A charge: what a reservation spends against one budget, as the store is handed it. A leaf,
//! so that the receipt that records charges does not depend on how they are computed
//! (`budget`, which also says how long a charge's window is: `Charge::window`).

/// What one reservation spends against one budget of one grant. It carries the whole predicate
/// (limit and window), so the store evaluates arithmetic it was handed and reads no policy.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Charge {
    /// The grant whose budget this spends.
    pub grant_id: String,
    /// The budget's metric (`count`, or an integer argument's name).
    pub metric: String,
    /// How much this reservation spends.
    pub amount: u64,
    /// The most the window's sum may reach.
    pub limit: u64,
    /// The window, in seconds.
    pub window_seconds: u64,
}
