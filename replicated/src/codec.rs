//! Between the gRPC messages of `proto/bloomkv.proto` and the types the service and openraft
//! use. A message missing a field it cannot do without (a vote, a request's write) is refused
//! as `invalid argument`, never taken for a default.

use std::collections::{BTreeMap, BTreeSet};

use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use openraft::{
    BasicNode, CommittedLeaderId, Entry, EntryPayload, LeaderId, LogId, Membership, SnapshotMeta,
    StoredMembership, Vote,
};
use tonic::Status;

use crate::proto;
use crate::{Blob, NodeId, Request, Response, TypeConfig};

fn missing(what: &str) -> Status {
    Status::invalid_argument(format!("the message has no {what}"))
}

// ---- the client API ----

impl From<Request> for proto::Request {
    fn from(request: Request) -> proto::Request {
        use proto::request::Kind;
        let kind = match request {
            Request::Put { key, value } => Kind::Put(put(key, value)),
            Request::Delete { key } => Kind::Delete(proto::Delete { key: key.0 }),
            Request::PutMany { pairs } => Kind::PutMany(proto::PutMany {
                pairs: pairs.into_iter().map(|(k, v)| put(k, v)).collect(),
            }),
            Request::Cas { key, expected, new } => Kind::Cas(proto::Cas {
                key: key.0,
                expected: expected.map(|b| b.0),
                new_value: new.map(|b| b.0),
            }),
            Request::Session { client, seq, write } => Kind::Session(Box::new(proto::Session {
                client,
                seq,
                write: Some(Box::new((*write).into())),
            })),
        };
        proto::Request { kind: Some(kind) }
    }
}

fn put(key: Blob, value: Blob) -> proto::Put {
    proto::Put {
        key: key.0,
        value: value.0,
    }
}

impl TryFrom<proto::Request> for Request {
    type Error = Status;

    fn try_from(request: proto::Request) -> Result<Request, Status> {
        use proto::request::Kind;
        Ok(match request.kind.ok_or_else(|| missing("write"))? {
            Kind::Put(p) => Request::Put {
                key: Blob(p.key),
                value: Blob(p.value),
            },
            Kind::Delete(d) => Request::Delete { key: Blob(d.key) },
            Kind::PutMany(many) => Request::PutMany {
                pairs: (many.pairs.into_iter())
                    .map(|p| (Blob(p.key), Blob(p.value)))
                    .collect(),
            },
            Kind::Cas(cas) => Request::Cas {
                key: Blob(cas.key),
                expected: cas.expected.map(Blob),
                new: cas.new_value.map(Blob),
            },
            Kind::Session(session) => Request::Session {
                client: session.client,
                seq: session.seq,
                write: Box::new(Request::try_from(
                    *session.write.ok_or_else(|| missing("session write"))?,
                )?),
            },
        })
    }
}

impl From<Response> for proto::Response {
    fn from(response: Response) -> proto::Response {
        proto::Response {
            index: response.index,
            swapped: response.swapped,
            found: response.found.map(|b| b.0),
            superseded: response.superseded,
        }
    }
}

impl From<proto::Response> for Response {
    fn from(response: proto::Response) -> Response {
        Response {
            index: response.index,
            swapped: response.swapped,
            found: response.found.map(Blob),
            superseded: response.superseded,
        }
    }
}

// ---- Raft's types ----

fn leader_id_to(id: LeaderId<NodeId>) -> proto::LeaderId {
    proto::LeaderId {
        term: id.term,
        node_id: id.node_id,
    }
}

fn leader_id_from(id: Option<proto::LeaderId>) -> Result<LeaderId<NodeId>, Status> {
    let id = id.ok_or_else(|| missing("leader id"))?;
    Ok(LeaderId::new(id.term, id.node_id))
}

fn vote_to(vote: Vote<NodeId>) -> Option<proto::Vote> {
    Some(proto::Vote {
        leader_id: Some(leader_id_to(vote.leader_id)),
        committed: vote.committed,
    })
}

fn vote_from(vote: Option<proto::Vote>) -> Result<Vote<NodeId>, Status> {
    let vote = vote.ok_or_else(|| missing("vote"))?;
    Ok(Vote {
        leader_id: leader_id_from(vote.leader_id)?,
        committed: vote.committed,
    })
}

fn log_id_to(log_id: LogId<NodeId>) -> proto::LogId {
    let leader: CommittedLeaderId<NodeId> = log_id.leader_id;
    proto::LogId {
        leader_id: Some(leader_id_to(leader)),
        index: log_id.index,
    }
}

fn log_id_from(log_id: proto::LogId) -> Result<LogId<NodeId>, Status> {
    Ok(LogId::new(leader_id_from(log_id.leader_id)?, log_id.index))
}

fn some_log_id_to(log_id: Option<LogId<NodeId>>) -> Option<proto::LogId> {
    log_id.map(log_id_to)
}

fn some_log_id_from(log_id: Option<proto::LogId>) -> Result<Option<LogId<NodeId>>, Status> {
    log_id.map(log_id_from).transpose()
}

fn membership_to(membership: &Membership<NodeId, BasicNode>) -> proto::Membership {
    proto::Membership {
        configs: (membership.get_joint_config().iter())
            .map(|voters| proto::VoterSet {
                ids: voters.iter().copied().collect(),
            })
            .collect(),
        nodes: (membership.nodes())
            .map(|(id, node)| (*id, node.addr.clone()))
            .collect(),
    }
}

fn membership_from(
    membership: Option<proto::Membership>,
) -> Result<Membership<NodeId, BasicNode>, Status> {
    let membership = membership.ok_or_else(|| missing("membership"))?;
    let configs: Vec<BTreeSet<NodeId>> = (membership.configs.into_iter())
        .map(|set| set.ids.into_iter().collect())
        .collect();
    let nodes: BTreeMap<NodeId, BasicNode> = (membership.nodes.into_iter())
        .map(|(id, addr)| (id, BasicNode { addr }))
        .collect();
    // `Membership::new` adds any voter missing from `nodes` with a default node; a voter
    // without an address would be unreachable, so such a membership is refused instead.
    if let Some(voter) = (configs.iter().flatten()).find(|id| !nodes.contains_key(id)) {
        return Err(Status::invalid_argument(format!(
            "the membership names voter {voter} without its address"
        )));
    }
    Ok(Membership::new(configs, nodes))
}

fn entry_to(entry: Entry<TypeConfig>) -> proto::Entry {
    use proto::entry::Payload;
    let payload = match entry.payload {
        EntryPayload::Blank => Payload::Blank(proto::Blank {}),
        EntryPayload::Normal(request) => Payload::Normal(request.into()),
        EntryPayload::Membership(membership) => Payload::Membership(membership_to(&membership)),
    };
    proto::Entry {
        log_id: Some(log_id_to(entry.log_id)),
        payload: Some(payload),
    }
}

fn entry_from(entry: proto::Entry) -> Result<Entry<TypeConfig>, Status> {
    use proto::entry::Payload;
    let payload = match entry.payload.ok_or_else(|| missing("entry payload"))? {
        Payload::Blank(_) => EntryPayload::Blank,
        Payload::Normal(request) => EntryPayload::Normal(request.try_into()?),
        Payload::Membership(m) => EntryPayload::Membership(membership_from(Some(m))?),
    };
    Ok(Entry {
        log_id: log_id_from(entry.log_id.ok_or_else(|| missing("entry log id"))?)?,
        payload,
    })
}

impl From<AppendEntriesRequest<TypeConfig>> for proto::AppendEntriesRequest {
    fn from(rpc: AppendEntriesRequest<TypeConfig>) -> proto::AppendEntriesRequest {
        proto::AppendEntriesRequest {
            vote: vote_to(rpc.vote),
            prev_log_id: some_log_id_to(rpc.prev_log_id),
            entries: rpc.entries.into_iter().map(entry_to).collect(),
            leader_commit: some_log_id_to(rpc.leader_commit),
        }
    }
}

impl TryFrom<proto::AppendEntriesRequest> for AppendEntriesRequest<TypeConfig> {
    type Error = Status;

    fn try_from(rpc: proto::AppendEntriesRequest) -> Result<Self, Status> {
        Ok(AppendEntriesRequest {
            vote: vote_from(rpc.vote)?,
            prev_log_id: some_log_id_from(rpc.prev_log_id)?,
            entries: (rpc.entries.into_iter())
                .map(entry_from)
                .collect::<Result<_, _>>()?,
            leader_commit: some_log_id_from(rpc.leader_commit)?,
        })
    }
}

impl From<AppendEntriesResponse<NodeId>> for proto::AppendEntriesReply {
    fn from(response: AppendEntriesResponse<NodeId>) -> proto::AppendEntriesReply {
        use proto::append_entries_reply::Result as R;
        let result = match response {
            AppendEntriesResponse::Success => R::Success(proto::Blank {}),
            AppendEntriesResponse::PartialSuccess(matching) => {
                R::PartialSuccess(proto::PartialSuccess {
                    matching: some_log_id_to(matching),
                })
            }
            AppendEntriesResponse::Conflict => R::Conflict(proto::Blank {}),
            AppendEntriesResponse::HigherVote(vote) => {
                R::HigherVote(vote_to(vote).expect("a vote"))
            }
        };
        proto::AppendEntriesReply {
            result: Some(result),
        }
    }
}

impl TryFrom<proto::AppendEntriesReply> for AppendEntriesResponse<NodeId> {
    type Error = Status;

    fn try_from(reply: proto::AppendEntriesReply) -> Result<Self, Status> {
        use proto::append_entries_reply::Result as R;
        Ok(match reply.result.ok_or_else(|| missing("result"))? {
            R::Success(_) => AppendEntriesResponse::Success,
            R::PartialSuccess(p) => {
                AppendEntriesResponse::PartialSuccess(some_log_id_from(p.matching)?)
            }
            R::Conflict(_) => AppendEntriesResponse::Conflict,
            R::HigherVote(vote) => AppendEntriesResponse::HigherVote(vote_from(Some(vote))?),
        })
    }
}

impl From<VoteRequest<NodeId>> for proto::VoteRequest {
    fn from(rpc: VoteRequest<NodeId>) -> proto::VoteRequest {
        proto::VoteRequest {
            vote: vote_to(rpc.vote),
            last_log_id: some_log_id_to(rpc.last_log_id),
        }
    }
}

impl TryFrom<proto::VoteRequest> for VoteRequest<NodeId> {
    type Error = Status;

    fn try_from(rpc: proto::VoteRequest) -> Result<Self, Status> {
        Ok(VoteRequest::new(
            vote_from(rpc.vote)?,
            some_log_id_from(rpc.last_log_id)?,
        ))
    }
}

impl From<VoteResponse<NodeId>> for proto::VoteReply {
    fn from(response: VoteResponse<NodeId>) -> proto::VoteReply {
        proto::VoteReply {
            vote: vote_to(response.vote),
            vote_granted: response.vote_granted,
            last_log_id: some_log_id_to(response.last_log_id),
        }
    }
}

impl TryFrom<proto::VoteReply> for VoteResponse<NodeId> {
    type Error = Status;

    fn try_from(reply: proto::VoteReply) -> Result<Self, Status> {
        Ok(VoteResponse::new(
            vote_from(reply.vote)?,
            some_log_id_from(reply.last_log_id)?,
            reply.vote_granted,
        ))
    }
}

impl From<InstallSnapshotRequest<TypeConfig>> for proto::InstallSnapshotRequest {
    fn from(rpc: InstallSnapshotRequest<TypeConfig>) -> proto::InstallSnapshotRequest {
        let meta = rpc.meta;
        proto::InstallSnapshotRequest {
            vote: vote_to(rpc.vote),
            meta: Some(proto::SnapshotMeta {
                last_log_id: some_log_id_to(meta.last_log_id),
                last_membership_log_id: some_log_id_to(*meta.last_membership.log_id()),
                last_membership: Some(membership_to(meta.last_membership.membership())),
                snapshot_id: meta.snapshot_id,
            }),
            offset: rpc.offset,
            data: rpc.data,
            done: rpc.done,
        }
    }
}

impl TryFrom<proto::InstallSnapshotRequest> for InstallSnapshotRequest<TypeConfig> {
    type Error = Status;

    fn try_from(rpc: proto::InstallSnapshotRequest) -> Result<Self, Status> {
        let meta = rpc.meta.ok_or_else(|| missing("snapshot meta"))?;
        Ok(InstallSnapshotRequest {
            vote: vote_from(rpc.vote)?,
            meta: SnapshotMeta {
                last_log_id: some_log_id_from(meta.last_log_id)?,
                last_membership: StoredMembership::new(
                    some_log_id_from(meta.last_membership_log_id)?,
                    membership_from(meta.last_membership)?,
                ),
                snapshot_id: meta.snapshot_id,
            },
            offset: rpc.offset,
            data: rpc.data,
            done: rpc.done,
        })
    }
}

impl From<InstallSnapshotResponse<NodeId>> for proto::InstallSnapshotReply {
    fn from(response: InstallSnapshotResponse<NodeId>) -> proto::InstallSnapshotReply {
        proto::InstallSnapshotReply {
            vote: vote_to(response.vote),
        }
    }
}

impl TryFrom<proto::InstallSnapshotReply> for InstallSnapshotResponse<NodeId> {
    type Error = Status;

    fn try_from(reply: proto::InstallSnapshotReply) -> Result<Self, Status> {
        Ok(InstallSnapshotResponse {
            vote: vote_from(reply.vote)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn log_id(term: u64, node: NodeId, index: u64) -> LogId<NodeId> {
        LogId::new(CommittedLeaderId::new(term, node), index)
    }

    fn three_voters() -> Membership<NodeId, BasicNode> {
        let nodes: BTreeMap<NodeId, BasicNode> = (1..=4)
            .map(|id| (id, BasicNode::new(format!("127.0.0.1:{}", 21000 + id))))
            .collect();
        Membership::new(vec![BTreeSet::from([1, 2, 3])], nodes)
    }

    #[test]
    fn every_request_kind_crosses_and_comes_back_the_same() {
        let requests = vec![
            Request::Put {
                key: Blob(vec![0, 0xff]),
                value: Blob::from("v"),
            },
            Request::Delete {
                key: Blob::from("k"),
            },
            Request::PutMany {
                pairs: vec![
                    (Blob::from("a"), Blob::default()),
                    (Blob::from("b"), Blob(vec![1])),
                ],
            },
            Request::Cas {
                key: Blob::from("k"),
                expected: None,
                new: Some(Blob::default()),
            },
            Request::Session {
                client: 7,
                seq: 9,
                write: Box::new(Request::Cas {
                    key: Blob::from("k"),
                    expected: Some(Blob::from("old")),
                    new: None,
                }),
            },
        ];
        for request in requests {
            let sent: proto::Request = request.clone().into();
            assert_eq!(Request::try_from(sent).unwrap(), request);
        }
        let empty = Request::try_from(proto::Request { kind: None }).unwrap_err();
        assert_eq!(empty.code(), tonic::Code::InvalidArgument);
    }

    #[test]
    fn raft_messages_cross_and_come_back_the_same() {
        let vote = Vote::new_committed(3, 1);
        let rpc = AppendEntriesRequest::<TypeConfig> {
            vote,
            prev_log_id: Some(log_id(2, 1, 10)),
            entries: vec![
                Entry {
                    log_id: log_id(3, 1, 11),
                    payload: EntryPayload::Blank,
                },
                Entry {
                    log_id: log_id(3, 1, 12),
                    payload: EntryPayload::Normal(Request::Delete {
                        key: Blob::from("k"),
                    }),
                },
                Entry {
                    log_id: log_id(3, 1, 13),
                    payload: EntryPayload::Membership(three_voters()),
                },
            ],
            leader_commit: Some(log_id(3, 1, 11)),
        };
        let back =
            AppendEntriesRequest::try_from(proto::AppendEntriesRequest::from(rpc.clone())).unwrap();
        assert_eq!(format!("{back:?}"), format!("{rpc:?}"));

        for response in [
            AppendEntriesResponse::Success,
            AppendEntriesResponse::PartialSuccess(None),
            AppendEntriesResponse::PartialSuccess(Some(log_id(1, 2, 3))),
            AppendEntriesResponse::Conflict,
            AppendEntriesResponse::HigherVote(Vote::new(5, 2)),
        ] {
            let expected = format!("{response:?}");
            let sent = proto::AppendEntriesReply::from(response);
            let back = AppendEntriesResponse::try_from(sent).unwrap();
            assert_eq!(format!("{back:?}"), expected);
        }

        let rpc = VoteRequest::new(Vote::new(4, 2), Some(log_id(3, 1, 13)));
        let back = VoteRequest::try_from(proto::VoteRequest::from(rpc.clone())).unwrap();
        assert_eq!(back, rpc);
        let response = VoteResponse::new(Vote::new(4, 2), None, true);
        let back = VoteResponse::try_from(proto::VoteReply::from(response.clone())).unwrap();
        assert_eq!(back, response);

        let rpc = InstallSnapshotRequest::<TypeConfig> {
            vote,
            meta: SnapshotMeta {
                last_log_id: Some(log_id(3, 1, 13)),
                last_membership: StoredMembership::new(Some(log_id(3, 1, 13)), three_voters()),
                snapshot_id: "3-1-13-1".to_string(),
            },
            offset: 1 << 20,
            data: vec![0, 1, 2, 255],
            done: true,
        };
        let back =
            InstallSnapshotRequest::try_from(proto::InstallSnapshotRequest::from(rpc.clone()))
                .unwrap();
        assert_eq!(back, rpc);
    }

    #[test]
    fn a_raft_message_without_its_vote_or_a_voter_without_its_address_is_refused() {
        let mut rpc = proto::VoteRequest::from(VoteRequest::new(Vote::new(1, 1), None));
        rpc.vote = None;
        let refused = VoteRequest::try_from(rpc).unwrap_err();
        assert_eq!(refused.code(), tonic::Code::InvalidArgument);
        assert!(refused.message().contains("vote"), "{refused}");

        let mut membership = membership_to(&three_voters());
        membership.nodes.remove(&2);
        let refused = membership_from(Some(membership)).unwrap_err();
        assert!(refused.message().contains("voter 2"), "{refused}");
    }
}
