//! The DOME engine's counters, `parsers/dome_reassembly.DomeStats` by name and order.

macro_rules! dome_stats {
    ($($name:ident),* $(,)?) => {
        #[derive(Default, Clone, Debug, PartialEq, Eq)]
        pub struct DomeStats {
            $(pub $name: i64,)*
        }

        impl DomeStats {
            pub const NAMES: &'static [&'static str] = &[$(stringify!($name)),*];

            pub fn values(&self) -> Vec<i64> {
                vec![$(self.$name),*]
            }

            /// Set a counter by name; false for a name this engine does not know.
            pub fn set(&mut self, name: &str, value: i64) -> bool {
                match name {
                    $(stringify!($name) => { self.$name = value; true })*
                    _ => false,
                }
            }
        }
    };
}

dome_stats!(
    lines, calls, cut_calls, stray_call_ends, commands_without_call, expired_calls, call_evictions,
    process_deaths, puts, expired_puts, put_evictions, orphan_putdones, putcount_joins,
    ambiguous_putdones, repeated_putdones, orphan_putdone_errors, unframed_lines, unusable_lines,
    capacity, fs_events, journald_suppressed_lines,
);
