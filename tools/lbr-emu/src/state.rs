// SPDX-License-Identifier: GPL-2.0

//! `save=PATH` and `load=PATH`: the emulator's state, for a guest saved with QEMU's migration
//! to a file and restored in another QEMU process (`-incoming`), which loads a fresh plugin.
//!
//! QEMU's snapshot holds the guest; what the plugin learned while the guest ran is here: per
//! vCPU ([`Learned`]) the IDT base of the last `lidt`, the highest CPUID leaves QEMU answers,
//! the linear-address width the guest read, the instructions since the last recorded branch
//! (the next record's cycle count) and the `bts_recent=N` ring; and the global counters
//! ([`Counters`]: the log's `seq` and the `exit` totals go on), whether the vendor warning was
//! given, and whether the `stall=` stall is over (once per run).
//!
//! A state is saved only when it is quiescent ([`capture`]): a fresh plugin given it behaves
//! from then on exactly as the one that saved it. The recorders' MSRs and whatever is in
//! progress are therefore not saved but required to be at power-on ([`Cpu::unquiescent`]), and
//! so is the stall ([`Stall::at_rest`]). A state is loaded only by a plugin with the same
//! arguments (but `log=`, `save=` and `load=`), the same vCPU count and this [`VERSION`].
//!
//! The file is one JSON object: `format` ("lbr-emu-state"), `version`, `args`, `vcpus`,
//! `counters`, `vendor_warned`, `stall_over`, `cpus` (one object per vCPU); addresses as
//! `0x` strings, counts as numbers, as in the log.

use serde_json::{json, Value};

use crate::bts::Stored;
use crate::model::Model;
use crate::stall::Stall;
use crate::vcpu::Cpu;

/// The state file's format version: a plugin reads only its own.
pub const VERSION: u64 = 1;

/// The `format` member that marks a state file.
const FORMAT: &str = "lbr-emu-state";

/// What one vCPU's emulator learned while the guest ran, which a fresh plugin lacks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Learned {
    /// The IDT base of the last `lidt`: #DB delivery is recognised by the IDT's gate 1, and a
    /// guest loads its IDT while it boots, not after a restore.
    pub idt: Option<u64>,
    /// The highest basic and extended CPUID leaves QEMU answers (read when the guest asks for
    /// leaf 0 / 0x80000000, which a booted guest does not again): the model's leaves above
    /// them are answered by the emulator.
    pub orig_max: [Option<u32>; 2],
    /// The linear-address width the guest read from CPUID.80000008H (IA32_DS_AREA's
    /// canonical check).
    pub linear_bits: u32,
    /// Instructions in the blocks entered since the last recorded branch (since power-on if
    /// none): the cycle count of the next record (saturated at 0xffff there).
    pub since_record: u64,
    /// `bts_recent=N`: the newest stored BTS records, oldest first, and the stores in all.
    pub recent: Vec<Stored>,
    pub recent_total: u64,
}

/// The global counters: the log's next `seq` and the totals of its `exit` event.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    pub events: u64,
    pub seen: u64,
    pub recorded: u64,
    pub bts_stored: u64,
}

/// A saved emulator.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct State {
    /// The plugin's arguments but `log=`, `save=`, `load=` ([`crate::args::Config::shaping`]).
    pub args: Vec<String>,
    pub vcpus: usize,
    pub counters: Counters,
    /// The warning that the `-cpu` vendor is not the model's was given (once per run).
    pub vendor_warned: bool,
    /// `stall=`: the stall happened (or was released before its freeze); once per run.
    pub stall_over: bool,
    pub cpus: Vec<Learned>,
}

/// A reason not to save: the vCPU it concerns (None: no one vCPU) and why.
pub type Refusal = (Option<u32>, String);

/// The state to save, if it is quiescent: every vCPU (`cpus`, each with its instructions since
/// the last recorded branch) equals a fresh one given what it learned, and the stall (if any)
/// is at rest. Otherwise every reason it is not.
pub fn capture(
    model: Model,
    bts_recent: usize,
    cpus: &[(&Cpu, u64)],
    stall: Option<&Stall>,
    args: Vec<String>,
    counters: Counters,
    vendor_warned: bool,
) -> Result<State, Vec<Refusal>> {
    let mut refused = Vec::new();
    for (i, (cpu, _)) in cpus.iter().enumerate() {
        for why in cpu.unquiescent(model, bts_recent) {
            refused.push((Some(i as u32), why));
        }
    }
    let stall_over = match stall.map(Stall::at_rest) {
        None => false,
        Some(Ok(over)) => over,
        Some(Err(why)) => {
            refused.push((Some(stall.unwrap().spec.cpu), why.to_string()));
            false
        }
    };
    if !refused.is_empty() {
        return Err(refused);
    }
    Ok(State {
        args,
        vcpus: cpus.len(),
        counters,
        vendor_warned,
        stall_over,
        cpus: cpus.iter().map(|(c, since)| c.learned(*since)).collect(),
    })
}

fn hex(v: u64) -> String {
    format!("{v:#x}")
}

/// FNV-1a, 64 bits, of `bytes`, as `0x` and 16 hex digits: the digest the `saved` and
/// `restored` events give of the state file.
pub fn digest(bytes: &[u8]) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h = (h ^ b as u64).wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:#018x}")
}

/// Member `key` of object `v`, named `at` in errors.
fn get<'a>(v: &'a Value, at: &str, key: &str) -> Result<&'a Value, String> {
    v.get(key).ok_or_else(|| format!("{at}{key}: missing"))
}

fn num(v: &Value, at: &str, key: &str) -> Result<u64, String> {
    get(v, at, key)?
        .as_u64()
        .ok_or_else(|| format!("{at}{key}: not a count"))
}

fn flag(v: &Value, at: &str, key: &str) -> Result<bool, String> {
    get(v, at, key)?
        .as_bool()
        .ok_or_else(|| format!("{at}{key}: not true or false"))
}

/// A `0x` hex string (or null, if `v` is).
fn opt_hex(v: &Value, at: &str) -> Result<Option<u64>, String> {
    if v.is_null() {
        return Ok(None);
    }
    v.as_str()
        .and_then(|s| s.strip_prefix("0x"))
        .and_then(|s| u64::from_str_radix(s, 16).ok())
        .map(Some)
        .ok_or_else(|| format!("{at}: not a 0x number"))
}

fn hex_of(v: &Value, at: &str) -> Result<u64, String> {
    opt_hex(v, at)?.ok_or_else(|| format!("{at}: not a 0x number"))
}

fn array<'a>(v: &'a Value, at: &str, key: &str) -> Result<&'a Vec<Value>, String> {
    get(v, at, key)?
        .as_array()
        .ok_or_else(|| format!("{at}{key}: not an array"))
}

impl Learned {
    fn to_json(&self) -> Value {
        json!({
            "idt": self.idt.map(hex),
            "orig_max": self.orig_max.map(|m| m.map(|m| hex(m as u64))),
            "linear_bits": self.linear_bits,
            "since_record": self.since_record,
            "recent": self.recent.iter()
                .map(|r| json!([hex(r.from), hex(r.to), hex(r.flags)]))
                .collect::<Vec<_>>(),
            "recent_total": self.recent_total,
        })
    }

    fn from_json(v: &Value, at: &str) -> Result<Learned, String> {
        let orig = array(v, at, "orig_max")?;
        let [basic, ext] = &orig[..] else {
            return Err(format!("{at}orig_max: not two leaves"));
        };
        let leaf = |l: &Value, what: &str| -> Result<Option<u32>, String> {
            opt_hex(l, &format!("{at}orig_max.{what}"))?
                .map(|m| u32::try_from(m).map_err(|_| format!("{at}orig_max.{what}: too big")))
                .transpose()
        };
        let mut recent = Vec::new();
        for (i, r) in array(v, at, "recent")?.iter().enumerate() {
            let at = format!("{at}recent[{i}]");
            let q = r.as_array().map(Vec::as_slice).unwrap_or_default();
            let [from, to, flags] = q else {
                return Err(format!("{at}: not three quadwords"));
            };
            recent.push(Stored {
                from: hex_of(from, &at)?,
                to: hex_of(to, &at)?,
                flags: hex_of(flags, &at)?,
            });
        }
        Ok(Learned {
            idt: opt_hex(get(v, at, "idt")?, &format!("{at}idt"))?,
            orig_max: [leaf(basic, "basic")?, leaf(ext, "extended")?],
            linear_bits: u32::try_from(num(v, at, "linear_bits")?)
                .map_err(|_| format!("{at}linear_bits: too big"))?,
            since_record: num(v, at, "since_record")?,
            recent,
            recent_total: num(v, at, "recent_total")?,
        })
    }
}

impl State {
    /// The state file's text: one JSON object and a newline.
    pub fn to_json(&self) -> String {
        let c = &self.counters;
        let v = json!({
            "format": FORMAT,
            "version": VERSION,
            "args": self.args,
            "vcpus": self.vcpus,
            "counters": {"events": c.events, "seen": c.seen, "recorded": c.recorded,
                         "bts_stored": c.bts_stored},
            "vendor_warned": self.vendor_warned,
            "stall_over": self.stall_over,
            "cpus": self.cpus.iter().map(Learned::to_json).collect::<Vec<_>>(),
        });
        let mut s = serde_json::to_string(&v).expect("a JSON value serialises");
        s.push('\n');
        s
    }

    /// Reads a state file's text: an error unless it is a state file of this [`VERSION`].
    pub fn parse(text: &str) -> Result<State, String> {
        let v: Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
        if v.get("format").and_then(Value::as_str) != Some(FORMAT) {
            return Err("not an lbr-emu state file".into());
        }
        let version = num(&v, "", "version")?;
        if version != VERSION {
            return Err(format!(
                "state format version {version}, this lbr-emu reads version {VERSION}"
            ));
        }
        let args = array(&v, "", "args")?
            .iter()
            .map(|a| a.as_str().map(str::to_string))
            .collect::<Option<Vec<_>>>()
            .ok_or("args: not strings")?;
        let c = get(&v, "", "counters")?;
        let counters = Counters {
            events: num(c, "counters.", "events")?,
            seen: num(c, "counters.", "seen")?,
            recorded: num(c, "counters.", "recorded")?,
            bts_stored: num(c, "counters.", "bts_stored")?,
        };
        let cpus = array(&v, "", "cpus")?
            .iter()
            .enumerate()
            .map(|(i, c)| Learned::from_json(c, &format!("cpus[{i}].")))
            .collect::<Result<Vec<_>, _>>()?;
        let vcpus = num(&v, "", "vcpus")? as usize;
        if cpus.len() != vcpus {
            return Err(format!("{} cpus for {vcpus} vCPUs", cpus.len()));
        }
        Ok(State {
            args,
            vcpus,
            counters,
            vendor_warned: flag(&v, "", "vendor_warned")?,
            stall_over: flag(&v, "", "stall_over")?,
            cpus,
        })
    }

    /// The vCPUs of a plugin that loads this state, with arguments `args` ([`Self::args`]'s
    /// form), `vcpus` vCPUs, `model`, `bts_recent` and `stall` (which is set over if it was):
    /// an error if the state was saved with other arguments or another vCPU count.
    pub fn restore(
        &self,
        args: &[String],
        vcpus: usize,
        model: Model,
        bts_recent: usize,
        stall: Option<&Stall>,
    ) -> Result<Vec<Cpu>, String> {
        if self.args != args {
            return Err(format!(
                "saved with the arguments {}, not {} (log=, save= and load= aside)",
                self.args.join(","),
                args.join(",")
            ));
        }
        if self.vcpus != vcpus {
            return Err(format!(
                "saved with {} vCPUs, this machine has {vcpus}",
                self.vcpus
            ));
        }
        let cpus = self
            .cpus
            .iter()
            .enumerate()
            .map(|(i, l)| {
                Cpu::restored(model, bts_recent, l).map_err(|e| format!("cpus[{i}]: {e}"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        if self.stall_over {
            stall.ok_or("stall_over without stall=")?.set_over();
        }
        Ok(cpus)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::args::parse_args;
    use crate::bts;
    use crate::model::MSR_DEBUGCTL;
    use crate::vcpu::Fixup;

    const IDT: [u64; 2] = [0xffff_fe00_0000_0000, 0xffff_fe00_0000_1000];

    /// Two booted vCPUs of `args`' model, quiescent, each with what a boot teaches.
    fn booted(args: &[&str]) -> (crate::args::Config, Vec<Cpu>) {
        let cfg = parse_args(args.iter().copied()).unwrap();
        let cpus = IDT
            .iter()
            .map(|&idt| {
                let mut c = Cpu::new(cfg.model, cfg.bts_recent);
                c.idt = Some(idt);
                c.orig_max = [Some(0xd), Some(0x8000_0008)];
                c.rec.set_linear_bits(0x3930);
                for i in 0..5 {
                    c.rec.recent.push(bts::Stored {
                        from: idt + i,
                        to: 0x40_1000,
                        flags: 0x10,
                    });
                }
                c
            })
            .collect();
        (cfg, cpus)
    }

    fn save(
        cfg: &crate::args::Config,
        cpus: &[Cpu],
        stall: Option<&Stall>,
    ) -> Result<State, Vec<Refusal>> {
        // Each vCPU with its instructions since the last recorded branch.
        let with_sb: Vec<(&Cpu, u64)> = cpus.iter().zip([1234, u64::MAX]).collect();
        capture(
            cfg.model,
            cfg.bts_recent,
            &with_sb,
            stall,
            cfg.shaping.clone(),
            Counters {
                events: 4242,
                seen: 7,
                recorded: 6,
                bts_stored: 10,
            },
            true,
        )
    }

    #[test]
    fn round_trip() {
        let args = ["model=skylake", "bts_recent=4", "stall=1:7:8", "log=/a"];
        let (cfg, cpus) = booted(&args);
        let stall = Stall::new(cfg.stall.unwrap());
        stall.marker(7);
        stall.marker(8); // released before any freeze: over
        let st = save(&cfg, &cpus, Some(&stall)).unwrap();
        let text = st.to_json();
        let back = State::parse(&text).unwrap();
        assert_eq!(back, st);
        assert_eq!(back.to_json(), text);
        assert_eq!(
            back.counters,
            Counters {
                events: 4242,
                seen: 7,
                recorded: 6,
                bts_stored: 10
            }
        );
        assert!(back.vendor_warned && back.stall_over);
        assert_eq!(back.cpus[1].since_record, u64::MAX);
        assert_eq!(back.cpus[0].idt, Some(IDT[0]));

        // Another plugin, the same arguments in another order and another log.
        let (cfg2, _) = booted(&[
            "stall=1:7:8",
            "log=/b",
            "load=/s",
            "bts_recent=4",
            "model=skylake",
        ]);
        let stall2 = Stall::new(cfg2.stall.unwrap());
        assert_eq!(stall2.at_rest(), Ok(false));
        let restored = back
            .restore(&cfg2.shaping, 2, cfg2.model, cfg2.bts_recent, Some(&stall2))
            .unwrap();
        assert_eq!(restored, cpus, "the vCPUs as they were saved");
        assert_eq!(stall2.at_rest(), Ok(true), "the stall is over, as it was");
        for (i, c) in restored.iter().enumerate() {
            assert_eq!(c.learned(back.cpus[i].since_record), back.cpus[i]);
            assert_eq!(c.rec.recent.records().count(), 4);
            assert_eq!(c.rec.recent.total(), 5);
        }
        // Saved again from the restored plugin: the same state.
        assert_eq!(save(&cfg2, &restored, Some(&stall2)).unwrap(), st);
    }

    #[test]
    fn a_state_in_progress_is_refused() {
        let (cfg, cpus) = booted(&["model=skylake", "bts_recent=4", "stall=1:7:8"]);
        let mut on = cpus.clone();
        on[1].rec.wrmsr(MSR_DEBUGCTL, 1);
        let why = save(&cfg, &on, None).unwrap_err();
        assert!(
            why.contains(&(Some(1), "LBR recording is on (MSR 0x1d9)".into())),
            "{why:?}"
        );
        assert!(why.iter().all(|w| w.0 == Some(1)), "{why:?}");

        let mut recorded = on.clone();
        recorded[1].rec.branch(&crate::classify::Branch {
            from: 0xffff_ffff_8100_0000,
            to: 0xffff_ffff_8100_0040,
            kind: crate::classify::Kind::Ret,
            cycles: 0,
        });
        recorded[1].rec.wrmsr(MSR_DEBUGCTL, 0);
        let why = save(&cfg, &recorded, None).unwrap_err();
        assert!(
            why.contains(&(
                Some(1),
                "recorder: records is not at its power-on value".into()
            )),
            "{why:?}"
        );

        let mut fixup = cpus.clone();
        fixup[0].fixup = Some(Fixup::MiscEnable);
        assert_eq!(
            save(&cfg, &fixup, None).unwrap_err(),
            [(
                Some(0),
                "the result of rdmsr IA32_MISC_ENABLE waits to be rewritten".to_string()
            )]
        );

        let stall = Stall::new(cfg.stall.unwrap());
        stall.marker(7);
        assert_eq!(
            save(&cfg, &cpus, Some(&stall)).unwrap_err(),
            [(
                Some(1),
                "stall=: armed, waiting for the vCPU's freeze".to_string()
            )]
        );
        assert!(save(&cfg, &cpus, None).is_ok());
    }

    #[test]
    fn a_load_with_another_version_arguments_or_vcpu_count_is_refused() {
        let (cfg, cpus) = booted(&["model=skylake", "bts_recent=4"]);
        let st = save(&cfg, &cpus, None).unwrap();
        let text = st.to_json();

        let other = text.replace(r#""version":1"#, r#""version":2"#);
        assert_ne!(other, text);
        assert_eq!(
            State::parse(&other).unwrap_err(),
            "state format version 2, this lbr-emu reads version 1"
        );
        assert_eq!(State::parse("{}").unwrap_err(), "not an lbr-emu state file");
        assert!(State::parse("{").unwrap_err().starts_with("not JSON"));
        let broken = text.replace(r#""idt":"0xfffffe0000001000""#, r#""idt":17"#);
        assert_eq!(
            State::parse(&broken).unwrap_err(),
            "cpus[1].idt: not a 0x number"
        );

        let restore = |args: &[&str], n| {
            let c = parse_args(args.iter().copied()).unwrap();
            st.restore(&c.shaping, n, c.model, c.bts_recent, None)
        };
        assert!(restore(&["model=skylake", "bts_recent=4", "log=/x"], 2).is_ok());
        assert_eq!(
            restore(&["model=skylake", "bts_recent=4", "trace=on"], 2).unwrap_err(),
            "saved with the arguments bts_recent=4,model=skylake, not \
             bts_recent=4,model=skylake,trace=on (log=, save= and load= aside)"
        );
        assert!(restore(&["model=icelake", "bts_recent=4"], 2)
            .unwrap_err()
            .starts_with("saved with the arguments"));
        assert_eq!(
            restore(&["model=skylake", "bts_recent=4"], 1).unwrap_err(),
            "saved with 2 vCPUs, this machine has 1"
        );
    }

    #[test]
    fn digest_is_fnv1a_64() {
        // The FNV-1a test vectors (draft-eastlake-fnv).
        assert_eq!(digest(b""), "0xcbf29ce484222325");
        assert_eq!(digest(b"a"), "0xaf63dc4c8601ec8c");
        assert_eq!(digest(b"foobar"), "0x85944171f73967e8");
    }
}
