// SPDX-License-Identifier: GPL-2.0

//! The ground-truth log's events, and their one serialisation ([`Event::to_json`]).
//!
//! The log is JSON lines, one object per event, read by the Python tests (tests/records.py,
//! tests/scenarios/, scripts/vm.py). Each object has `event` (its kind), `seq` (its position in
//! the log, from 0) and the event's fields. Keys come out sorted (serde_json's default map), and
//! addresses and MSR values as `0x`-prefixed lowercase hex strings.

use serde_json::{json, Value};

use crate::bts::{BtsTally, Fields, Issue, Recent, Stats};
use crate::classify::Kind;
use crate::model::{Bts, Flavour, Model};
use crate::recorder::{Counts, Slot};
use crate::state::Counters;

/// The BTS buffer's position at a freeze: the DS area, its BTS fields as memory holds them then
/// (None if they cannot be read), the period's figures, with `cost=on` its cost, and with
/// `bts_recent=N` the newest records the vCPU stored (logged as `recent` and `recent_total`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BtsPosition {
    pub area: u64,
    pub fields: Option<Fields>,
    pub stats: Stats,
    pub cost: Option<BtsTally>,
    pub recent: Option<Recent>,
}

/// How an entry measurement (`cost=on`) ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EntryEnd {
    /// The handler's far return, `total` instructions after the delivery, to `back`.
    Return { total: u64, back: u64 },
    /// Still running after `cost::ENTRY_LIMIT` instructions.
    Limit,
    /// Another delivery started before the return.
    Nested,
}

/// One line of the log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// The plugin is installed: the model and the arguments.
    Start {
        model: Model,
        /// The plugin API versions QEMU offers (min, current).
        api: (i32, i32),
        vcpus: usize,
        trace: bool,
        cost: bool,
    },
    /// A system reset: every recorder is back in its power-on state.
    Reset { cpu: u32 },
    /// `trace=on`: a taken branch seen while recording (LBR or BTS) was on: `recorded` in the
    /// LBR, its record stored in the BTS buffer (`bts`); `delivery`: an interrupt or exception
    /// (kind `far`), not a branch instruction.
    Branch {
        cpu: u32,
        from: u64,
        to: u64,
        kind: Kind,
        recorded: bool,
        bts: bool,
        delivery: bool,
    },
    /// Recording switched on or off (by `cause` at `pc`), through the MSR `msr`: the LBR, or
    /// (`bts`) the Branch Trace Store (DEBUGCTL.TR and .BTS).
    Switch {
        cpu: u32,
        on: bool,
        cause: &'static str,
        pc: u64,
        msr: u32,
        bts: bool,
    },
    /// Recording (LBR or BTS) switched off: the record stack (newest first), LER and counts at
    /// that moment, and the BTS buffer's position if BTS was on.
    Freeze {
        cpu: u32,
        cause: &'static str,
        pc: u64,
        tos: usize,
        records: Vec<Slot>,
        ler: (u64, u64),
        counts: Counts,
        bts: Option<Box<BtsPosition>>,
    },
    /// The BTS met `issue` storing a record (the DS area at `area`, its fields as read): a
    /// fault the real part would take (`would-fault`), a full buffer (`bts-full`) or a
    /// misprogrammed one (`bts-misprogrammed`). Logged once per issue and configuration.
    BtsIssue {
        cpu: u32,
        issue: Issue,
        area: u64,
        fields: Option<Fields>,
    },
    /// The BTS index reached the interrupt threshold: the real part would raise a performance
    /// monitoring interrupt, which the emulator cannot (`btint`: DEBUGCTL.BTINT was set).
    WouldInterrupt {
        cpu: u32,
        index: u64,
        threshold: u64,
        btint: bool,
    },
    /// An emulated MSR read.
    Rdmsr { cpu: u32, msr: u32, value: u64 },
    /// An emulated MSR write that took effect.
    Wrmsr { cpu: u32, msr: u32, value: u64 },
    /// An access the real part would answer with #GP (a read gives 0, a write is ignored).
    WouldFault { cpu: u32, msr: u32, write: bool },
    /// `cost=on`: an interrupt or exception delivery from `from` to `to`, measured. Until the
    /// first far jump (if any): its instruction count and target, and the MSR accesses.
    Entry {
        cpu: u32,
        from: u64,
        to: u64,
        first_jmp: Option<(u64, u64)>,
        rdmsr: u64,
        wrmsr: u64,
        end: EntryEnd,
    },
    /// A guest marker (`cpuid` with the marker leaf): ECX.
    Marker { cpu: u32, value: u32 },
    /// `stall=`: vCPU `cpu` stalls, at its freeze whose next instruction is `pc`.
    Stall { cpu: u32, pc: u64 },
    /// `stall=`: its stall ended (`end`: the releasing marker or the limit) after `ms`.
    StallEnd {
        cpu: u32,
        end: &'static str,
        ms: u64,
    },
    /// A configuration error the guest cannot see (also printed on QEMU's plugin output).
    Error { message: String },
    /// `save=`: the state was written to `path`; `digest`: [`crate::state::digest`] of it.
    Saved { path: String, digest: String },
    /// `save=`: not saved, because of `reason` (on vCPU `cpu`, if it concerns one); one event
    /// per reason.
    SaveRefused { cpu: Option<u32>, reason: String },
    /// `load=`: the state in `path` (`digest`) was loaded; the counters it gave.
    Restored {
        path: String,
        digest: String,
        counters: Counters,
    },
    /// QEMU exits: branches seen and recorded in all (LBR), and BTS records stored.
    Exit {
        branches_seen: u64,
        recorded: u64,
        bts_stored: u64,
    },
}

fn hex(v: u64) -> String {
    format!("{v:#x}")
}

/// The model's recorder, as `start` logs it.
fn flavour_json(m: &Model) -> Value {
    match m.flavour {
        Flavour::Legacy {
            depth,
            from,
            to,
            info,
            format,
            ..
        } => json!({"flavour": "legacy", "depth": depth,
            "from": hex(from as u64), "to": hex(to as u64), "info": info.map(|i| hex(i as u64)), "format": format}),
        Flavour::Arch { depth, timed } => {
            json!({"flavour": "arch", "depth": depth, "timed": timed})
        }
        Flavour::AmdV2 { depth, erratum1452 } => {
            json!({"flavour": "amd-v2", "depth": depth, "erratum1452": erratum1452})
        }
        Flavour::AmdSingle => json!({"flavour": "amd-single", "depth": 1}),
    }
}

/// The BTS fields as the log gives them (nulls if they could not be read).
fn fields_json(area: u64, f: Option<Fields>) -> serde_json::Map<String, Value> {
    let h = |g: fn(&Fields) -> u64| f.as_ref().map(|f| hex(g(f)));
    let mut m = serde_json::Map::new();
    m.insert("ds_area".into(), json!(hex(area)));
    m.insert("base".into(), json!(h(|f| f.base)));
    m.insert("index".into(), json!(h(|f| f.index)));
    m.insert("max".into(), json!(h(|f| f.max)));
    m.insert("threshold".into(), json!(h(|f| f.threshold)));
    m
}

fn bts_json(p: &BtsPosition) -> Value {
    let s = &p.stats;
    let mut m = fields_json(p.area, p.fields);
    m.insert("index_at_on".into(), json!(s.index_at_on.map(hex)));
    m.insert("seen".into(), json!(s.seen));
    m.insert("stored".into(), json!(s.stored));
    m.insert("wraps".into(), json!(s.wraps));
    m.insert("dropped".into(), json!(s.dropped));
    m.insert(
        "cost".into(),
        match p.cost {
            Some(c) => json!({"insns": c.insns, "records": c.records, "reads": c.reads,
                              "stores": c.stores, "bytes": c.bytes}),
            None => Value::Null,
        },
    );
    // `bts_recent=N`: oldest first, each ["0xfrom", "0xto", "0xflags"]; null when off.
    let (recent, total) = match &p.recent {
        Some(r) => (
            r.records()
                .map(|r| json!([hex(r.from), hex(r.to), hex(r.flags)]))
                .collect(),
            json!(r.total()),
        ),
        None => (Value::Null, Value::Null),
    };
    m.insert("recent".into(), recent);
    m.insert("recent_total".into(), total);
    m.into()
}

impl Event {
    /// Whether the log is flushed after this event: after all but the frequent ones (a traced
    /// branch, an entry measurement, an MSR write).
    pub fn flush(&self) -> bool {
        !matches!(
            self,
            Event::Branch { .. }
                | Event::Entry { .. }
                | Event::Wrmsr { .. }
                | Event::WouldInterrupt { .. }
        )
    }

    /// The event as the log's JSON object, `seq` being its position in the log.
    pub fn to_json(&self, seq: u64) -> Value {
        let mut v = match self {
            Event::Start {
                model,
                api,
                vcpus,
                trace,
                cost,
            } => {
                let bts = match model.bts {
                    Bts::None => Value::Null,
                    Bts::Store { predicted } => json!({"predicted_bit": predicted}),
                };
                let mut start = json!({"event": "start", "model": model.name, "api": [api.0, api.1],
                                       "vcpus": vcpus, "trace": trace, "cost": cost, "bts": bts});
                if let (Value::Object(s), Value::Object(f)) = (&mut start, flavour_json(model)) {
                    s.extend(f);
                }
                start
            }
            Event::Reset { cpu } => json!({"event": "reset", "cpu": cpu}),
            Event::Branch {
                cpu,
                from,
                to,
                kind,
                recorded,
                bts,
                delivery,
            } => json!({"event": "branch", "cpu": cpu, "from": hex(*from), "to": hex(*to),
                        "kind": kind.name(), "recorded": recorded, "bts": bts,
                        "delivery": delivery}),
            Event::Switch {
                cpu,
                on,
                cause,
                pc,
                msr,
                bts,
            } => json!({"event": "switch", "cpu": cpu, "on": on, "cause": cause, "pc": hex(*pc),
                        "msr": hex(*msr as u64), "recorder": if *bts { "bts" } else { "lbr" }}),
            Event::Freeze {
                cpu,
                cause,
                pc,
                tos,
                records,
                ler: (lf, lt),
                counts: c,
                bts,
            } => {
                let records: Vec<Value> = records
                    .iter()
                    .map(|s| json!({"from": hex(s.from), "to": hex(s.to), "info": hex(s.info)}))
                    .collect();
                let by_kind = |n: &[u64; 8]| -> Value {
                    (1..8)
                        .filter_map(|k| Kind::from_code(k).map(|kind| (kind, n[k as usize])))
                        .map(|(kind, v)| (kind.name().to_string(), json!(v)))
                        .collect::<serde_json::Map<_, _>>()
                        .into()
                };
                json!({"event": "freeze", "cpu": cpu, "cause": cause, "pc": hex(*pc),
                       "tos": tos, "records": records, "ler": [hex(*lf), hex(*lt)],
                       "counts": {"seen": c.seen, "seen_user": c.seen_user, "recorded": c.recorded,
                                  "recorded_user": c.recorded_user,
                                  "seen_kind": by_kind(&c.seen_kind),
                                  "recorded_kind": by_kind(&c.recorded_kind)},
                       "bts": bts.as_deref().map(bts_json)})
            }
            Event::BtsIssue {
                cpu,
                issue,
                area,
                fields,
            } => {
                let mut m = fields_json(*area, *fields);
                m.insert("event".into(), json!(issue.event()));
                m.insert("cpu".into(), json!(cpu));
                match issue {
                    Issue::ReadFault(a) | Issue::WriteFault(a) => {
                        m.insert("op".into(), json!(issue.name()));
                        m.insert("addr".into(), json!(hex(*a)));
                    }
                    _ => {
                        m.insert("reason".into(), json!(issue.name()));
                    }
                }
                m.into()
            }
            Event::WouldInterrupt {
                cpu,
                index,
                threshold,
                btint,
            } => json!({"event": "would-interrupt", "cause": "bts-threshold", "cpu": cpu,
                        "index": hex(*index), "threshold": hex(*threshold), "btint": btint}),
            Event::Rdmsr { cpu, msr, value } => {
                json!({"event": "rdmsr", "cpu": cpu, "msr": hex(*msr as u64), "value": hex(*value)})
            }
            Event::Wrmsr { cpu, msr, value } => {
                json!({"event": "wrmsr", "cpu": cpu, "msr": hex(*msr as u64), "value": hex(*value)})
            }
            Event::WouldFault { cpu, msr, write } => {
                json!({"event": "would-fault", "cpu": cpu, "msr": hex(*msr as u64),
                       "op": if *write { "wrmsr" } else { "rdmsr" }})
            }
            Event::Entry {
                cpu,
                from,
                to,
                first_jmp,
                rdmsr,
                wrmsr,
                end,
            } => {
                let (insns, next) = match first_jmp {
                    Some((n, next)) => (json!(n), json!(hex(*next))),
                    None => (Value::Null, Value::Null),
                };
                let (end, total, back) = match end {
                    EntryEnd::Return { total, back } => ("return", json!(total), json!(hex(*back))),
                    EntryEnd::Limit => ("limit", Value::Null, Value::Null),
                    EntryEnd::Nested => ("nested", Value::Null, Value::Null),
                };
                json!({"event": "entry", "cpu": cpu, "from": hex(*from), "to": hex(*to),
                       "insns": insns, "next": next, "rdmsr": rdmsr, "wrmsr": wrmsr,
                       "total": total, "back": back, "end": end})
            }
            Event::Marker { cpu, value } => json!({"event": "marker", "cpu": cpu, "value": value}),
            Event::Stall { cpu, pc } => json!({"event": "stall", "cpu": cpu, "pc": hex(*pc)}),
            Event::StallEnd { cpu, end, ms } => {
                json!({"event": "stall-end", "cpu": cpu, "end": end, "ms": ms})
            }
            Event::Error { message } => json!({"event": "error", "message": message}),
            Event::Saved { path, digest } => {
                json!({"event": "saved", "path": path, "digest": digest})
            }
            Event::SaveRefused { cpu, reason } => {
                json!({"event": "save-refused", "cpu": cpu, "reason": reason})
            }
            Event::Restored {
                path,
                digest,
                counters: c,
            } => json!({"event": "restored", "path": path, "digest": digest,
                        "events": c.events, "branches_seen": c.seen, "recorded": c.recorded,
                        "bts_stored": c.bts_stored}),
            Event::Exit {
                branches_seen,
                recorded,
                bts_stored,
            } => json!({"event": "exit", "branches_seen": branches_seen, "recorded": recorded,
                        "bts_stored": bts_stored}),
        };
        v["seq"] = json!(seq);
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::find;

    fn line(e: &Event, seq: u64) -> String {
        serde_json::to_string(&e.to_json(seq)).unwrap()
    }

    // The exact lines (keys sorted) the Python tests parse.

    #[test]
    fn start_lines() {
        let start = |name| Event::Start {
            model: find(name).unwrap(),
            api: (7, 7),
            vcpus: 2,
            trace: false,
            cost: true,
        };
        assert_eq!(
            line(&start("skylake"), 0),
            r#"{"api":[7,7],"bts":{"predicted_bit":true},"cost":true,"depth":32,"event":"start","flavour":"legacy","format":5,"from":"0x680","info":"0xdc0","model":"skylake","seq":0,"to":"0x6c0","trace":false,"vcpus":2}"#
        );
        assert_eq!(
            line(&start("haswell"), 0),
            r#"{"api":[7,7],"bts":{"predicted_bit":true},"cost":true,"depth":16,"event":"start","flavour":"legacy","format":4,"from":"0x680","info":null,"model":"haswell","seq":0,"to":"0x6c0","trace":false,"vcpus":2}"#
        );
        assert_eq!(
            line(&start("amd"), 0),
            r#"{"api":[7,7],"bts":null,"cost":true,"depth":1,"event":"start","flavour":"amd-single","model":"amd","seq":0,"trace":false,"vcpus":2}"#
        );
    }

    #[test]
    fn record_lines() {
        let counts = Counts {
            seen: 10,
            seen_user: 4,
            recorded: 9,
            recorded_user: 3,
            seen_kind: [0, 2, 0, 0, 3, 0, 4, 1],
            recorded_kind: [0, 1, 0, 0, 3, 0, 4, 1],
        };
        let freeze = Event::Freeze {
            cpu: 1,
            cause: "wrmsr",
            pc: 0xffff_ffff_8100_0000,
            tos: 3,
            records: vec![Slot {
                from: 0x401000,
                to: 0x401010,
                info: 0x8000_0000_0000_0005,
            }],
            ler: (0x10, 0x20),
            counts,
            bts: None,
        };
        assert!(freeze.flush());
        assert_eq!(
            line(&freeze, 12),
            r#"{"bts":null,"cause":"wrmsr","counts":{"recorded":9,"recorded_kind":{"call":3,"call_ind":0,"far":1,"jcc":1,"jmp":0,"jmp_ind":0,"ret":4},"recorded_user":3,"seen":10,"seen_kind":{"call":3,"call_ind":0,"far":1,"jcc":2,"jmp":0,"jmp_ind":0,"ret":4},"seen_user":4},"cpu":1,"event":"freeze","ler":["0x10","0x20"],"pc":"0xffffffff81000000","records":[{"from":"0x401000","info":"0x8000000000000005","to":"0x401010"}],"seq":12,"tos":3}"#
        );
        let branch = Event::Branch {
            cpu: 0,
            from: 0x1000,
            to: 0x2000,
            kind: Kind::CallInd,
            recorded: true,
            bts: false,
            delivery: false,
        };
        assert!(!branch.flush());
        assert_eq!(
            line(&branch, 3),
            r#"{"bts":false,"cpu":0,"delivery":false,"event":"branch","from":"0x1000","kind":"call_ind","recorded":true,"seq":3,"to":"0x2000"}"#
        );
        let switch = Event::Switch {
            cpu: 0,
            on: true,
            cause: "#DB",
            pc: 0x1234,
            msr: 0x1d9,
            bts: false,
        };
        assert_eq!(
            line(&switch, 4),
            r##"{"cause":"#DB","cpu":0,"event":"switch","msr":"0x1d9","on":true,"pc":"0x1234","recorder":"lbr","seq":4}"##
        );
        assert_eq!(
            line(&Event::Reset { cpu: 0 }, 5),
            r#"{"cpu":0,"event":"reset","seq":5}"#
        );
    }

    #[test]
    fn msr_lines() {
        let rd = Event::Rdmsr {
            cpu: 2,
            msr: 0x680,
            value: 0xffff_ffff_8100_0000,
        };
        assert!(rd.flush());
        assert_eq!(
            line(&rd, 0),
            r#"{"cpu":2,"event":"rdmsr","msr":"0x680","seq":0,"value":"0xffffffff81000000"}"#
        );
        let wr = Event::Wrmsr {
            cpu: 2,
            msr: 0x1d9,
            value: 1,
        };
        assert!(!wr.flush());
        assert_eq!(
            line(&wr, 1),
            r#"{"cpu":2,"event":"wrmsr","msr":"0x1d9","seq":1,"value":"0x1"}"#
        );
        for (write, op) in [(true, "wrmsr"), (false, "rdmsr")] {
            assert_eq!(
                line(
                    &Event::WouldFault {
                        cpu: 0,
                        msr: 0x1c8,
                        write
                    },
                    2
                ),
                format!(r#"{{"cpu":0,"event":"would-fault","msr":"0x1c8","op":"{op}","seq":2}}"#)
            );
        }
    }

    #[test]
    fn entry_lines() {
        let entry = |first_jmp, end| Event::Entry {
            cpu: 0,
            from: 0x401000,
            to: 0xffff_ffff_a000_0000,
            first_jmp,
            rdmsr: 2,
            wrmsr: 1,
            end,
        };
        let ret = entry(
            Some((40, 0xffff_ffff_8100_0000)),
            EntryEnd::Return {
                total: 900,
                back: 0x401002,
            },
        );
        assert!(!ret.flush());
        assert_eq!(
            line(&ret, 7),
            r#"{"back":"0x401002","cpu":0,"end":"return","event":"entry","from":"0x401000","insns":40,"next":"0xffffffff81000000","rdmsr":2,"seq":7,"to":"0xffffffffa0000000","total":900,"wrmsr":1}"#
        );
        for (end, name) in [(EntryEnd::Limit, "limit"), (EntryEnd::Nested, "nested")] {
            assert_eq!(
                line(&entry(None, end), 8),
                format!(
                    r#"{{"back":null,"cpu":0,"end":"{name}","event":"entry","from":"0x401000","insns":null,"next":null,"rdmsr":2,"seq":8,"to":"0xffffffffa0000000","total":null,"wrmsr":1}}"#
                )
            );
        }
    }

    #[test]
    fn other_lines() {
        assert_eq!(
            line(&Event::Marker { cpu: 1, value: 3 }, 9),
            r#"{"cpu":1,"event":"marker","seq":9,"value":3}"#
        );
        assert_eq!(
            line(
                &Event::Stall {
                    cpu: 1,
                    pc: 0xffff_ffff_c000_1234
                },
                9
            ),
            r#"{"cpu":1,"event":"stall","pc":"0xffffffffc0001234","seq":9}"#
        );
        assert_eq!(
            line(
                &Event::StallEnd {
                    cpu: 1,
                    end: "marker",
                    ms: 1500
                },
                9
            ),
            r#"{"cpu":1,"end":"marker","event":"stall-end","ms":1500,"seq":9}"#
        );
        assert_eq!(
            line(
                &Event::Error {
                    message: "bad".into()
                },
                10
            ),
            r#"{"event":"error","message":"bad","seq":10}"#
        );
        let exit = Event::Exit {
            branches_seen: 100,
            recorded: 60,
            bts_stored: 7,
        };
        assert!(exit.flush());
        assert_eq!(
            line(&exit, 11),
            r#"{"branches_seen":100,"bts_stored":7,"event":"exit","recorded":60,"seq":11}"#
        );
    }

    #[test]
    fn save_and_restore_lines() {
        let saved = Event::Saved {
            path: "/s.json".into(),
            digest: "0x85944171f73967e8".into(),
        };
        assert_eq!(
            line(&saved, 12),
            r#"{"digest":"0x85944171f73967e8","event":"saved","path":"/s.json","seq":12}"#
        );
        let refused = |cpu| Event::SaveRefused {
            cpu,
            reason: "LBR recording is on (MSR 0x1d9)".into(),
        };
        assert_eq!(
            line(&refused(Some(1)), 12),
            r#"{"cpu":1,"event":"save-refused","reason":"LBR recording is on (MSR 0x1d9)","seq":12}"#
        );
        assert_eq!(
            line(&refused(None), 12),
            r#"{"cpu":null,"event":"save-refused","reason":"LBR recording is on (MSR 0x1d9)","seq":12}"#
        );
        let restored = Event::Restored {
            path: "/s.json".into(),
            digest: "0x85944171f73967e8".into(),
            counters: Counters {
                events: 14,
                seen: 100,
                recorded: 60,
                bts_stored: 7,
            },
        };
        assert_eq!(
            line(&restored, 15),
            r#"{"branches_seen":100,"bts_stored":7,"digest":"0x85944171f73967e8","event":"restored","events":14,"path":"/s.json","recorded":60,"seq":15}"#
        );
    }

    #[test]
    fn bts_lines() {
        let f = Fields {
            base: 0x2000,
            index: 0x2030,
            max: 0x2048,
            threshold: 0x2049,
        };
        let freeze = |bts| Event::Freeze {
            cpu: 0,
            cause: "wrmsr",
            pc: 0x10,
            tos: 0,
            records: vec![],
            ler: (0, 0),
            counts: Counts::default(),
            bts,
        };
        let pos = BtsPosition {
            area: 0x1000,
            fields: Some(f),
            stats: Stats {
                seen: 9,
                stored: 8,
                wraps: 2,
                dropped: 0,
                index_at_on: Some(0x2000),
            },
            cost: Some(BtsTally {
                insns: 80,
                records: 8,
                reads: 8,
                stores: 16,
                bytes: 256,
            }),
            recent: None,
        };
        let v = freeze(Some(Box::new(pos.clone()))).to_json(1);
        assert_eq!(
            serde_json::to_string(&v["bts"]).unwrap(),
            r#"{"base":"0x2000","cost":{"bytes":256,"insns":80,"reads":8,"records":8,"stores":16},"dropped":0,"ds_area":"0x1000","index":"0x2030","index_at_on":"0x2000","max":"0x2048","recent":null,"recent_total":null,"seen":9,"stored":8,"threshold":"0x2049","wraps":2}"#
        );
        let unread = BtsPosition {
            fields: None,
            cost: None,
            stats: Stats::default(),
            ..pos.clone()
        };
        assert_eq!(
            serde_json::to_string(&freeze(Some(Box::new(unread))).to_json(1)["bts"]).unwrap(),
            r#"{"base":null,"cost":null,"dropped":0,"ds_area":"0x1000","index":null,"index_at_on":null,"max":null,"recent":null,"recent_total":null,"seen":0,"stored":0,"threshold":null,"wraps":0}"#
        );
        // bts_recent=2 after three records stored: the newest two, oldest first, as
        // [from, to, flags]; the total counts the one pushed out.
        let mut recent = Recent::new(2);
        for (from, to, flags) in [(0x10, 0x20, 0x10), (0x30, 0x40, 0), (0x50, 0x60, 0x10)] {
            recent.push(crate::bts::Stored { from, to, flags });
        }
        let with = BtsPosition {
            cost: None,
            recent: Some(recent),
            ..pos.clone()
        };
        assert_eq!(
            serde_json::to_string(&freeze(Some(Box::new(with))).to_json(1)["bts"]).unwrap(),
            r#"{"base":"0x2000","cost":null,"dropped":0,"ds_area":"0x1000","index":"0x2030","index_at_on":"0x2000","max":"0x2048","recent":[["0x30","0x40","0x0"],["0x50","0x60","0x10"]],"recent_total":3,"seen":9,"stored":8,"threshold":"0x2049","wraps":2}"#
        );
        // On, nothing stored yet: an empty list, not null.
        let empty = BtsPosition {
            recent: Some(Recent::new(4)),
            ..pos
        };
        let v = freeze(Some(Box::new(empty))).to_json(1);
        assert_eq!(
            (&v["bts"]["recent"], &v["bts"]["recent_total"]),
            (&json!([]), &json!(0))
        );
        let issue = |issue, fields| Event::BtsIssue {
            cpu: 1,
            issue,
            area: 0x1000,
            fields,
        };
        assert_eq!(
            line(&issue(Issue::ReadFault(0x1000), None), 2),
            r#"{"addr":"0x1000","base":null,"cpu":1,"ds_area":"0x1000","event":"would-fault","index":null,"max":null,"op":"ds-read","seq":2,"threshold":null}"#
        );
        assert_eq!(
            line(&issue(Issue::IndexOutside, Some(f)), 3),
            r#"{"base":"0x2000","cpu":1,"ds_area":"0x1000","event":"bts-misprogrammed","index":"0x2030","max":"0x2048","reason":"index-outside-buffer","seq":3,"threshold":"0x2049"}"#
        );
        assert_eq!(
            serde_json::to_value(issue(Issue::Full, Some(f)).to_json(4)).unwrap()["event"],
            "bts-full"
        );
        let irq = Event::WouldInterrupt {
            cpu: 0,
            index: 0x2048,
            threshold: 0x2048,
            btint: true,
        };
        assert!(!irq.flush());
        assert_eq!(
            line(&irq, 5),
            r#"{"btint":true,"cause":"bts-threshold","cpu":0,"event":"would-interrupt","index":"0x2048","seq":5,"threshold":"0x2048"}"#
        );
    }
}
