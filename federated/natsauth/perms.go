package natsauth

import (
	"fmt"

	"github.com/edgesched/edgesched/federated"
)

// Permissions are one NATS user's subject permissions: allow lists only
// (everything not allowed is denied by the server), plus whether the user
// may answer requests sent to it (allow_responses).
type Permissions struct {
	Publish        []string `json:"publish"`
	Subscribe      []string `json:"subscribe"`
	AllowResponses bool     `json:"allow_responses,omitempty"`
}

// Inbox prefixes: every identity's request replies arrive under its own
// prefix, and its subscribe permission covers that prefix only, so no
// identity can read another's replies (JetStream API answers, publish
// acknowledgements, admin answers). Clients must connect with
// nats.CustomInboxPrefix(the prefix) (ClientConfig.InboxPrefix).
const (
	siteInboxPre           = "_INBOX.site."
	regionInboxPre         = "_INBOX.region."
	CoordinatorInboxPrefix = "_INBOX.coordinator"
	AdminInboxPrefix       = "_INBOX.admin"
)

// SiteInboxPrefix is a site's inbox prefix.
func SiteInboxPrefix(site string) string { return siteInboxPre + site }

// RegionInboxPrefix is a regional aggregator's inbox prefix.
func RegionInboxPrefix(region string) string { return regionInboxPre + region }

// Stream names behind the KV bucket and the object store (the JetStream
// conventions "KV_<bucket>" and "OBJ_<bucket>").
var (
	stateStream = "KV_" + federated.StateBucket
	modelStream = "OBJ_" + federated.ModelBucket
	leaseStream = "KV_" + federated.LeaseBucket
	haStream    = "KV_" + federated.HABucket
	ckptStream  = "OBJ_" + federated.CheckpointBucket
)

// SitePermissions are what a site may do, and nothing more:
//
//   - publish its own updates (edgesched.update.SITE, into the update
//     stream) and its own status reports (edgesched.status.SITE);
//   - receive its own acks (edgesched.ack.SITE) and replies on its own
//     inbox (_INBOX.site.SITE.>);
//   - read the state bucket and the model object store through JetStream
//     direct gets (stream info, last message of a subject, next message
//     of a subject) and see the bucket's change notifications
//     ($KV.EDGESCHED_STATE.>, read-only: they are published by the
//     coordinator).
//
// A site may not create consumers at all: a push consumer's delivery
// subject is not checked against its creator's permissions, so a site
// allowed to create one could have the server deliver stream messages to
// any subject with a listener (the coordinator's admin endpoints
// included). Direct gets answer only to the requester's reply subject.
// Nothing lets a site write the KV bucket or the object store, read the
// update stream (no consumer, no direct get, no subscription on
// edgesched.update.>), or use the admin API.
func SitePermissions(site string) (Permissions, error) {
	if !federated.ValidSite(site) {
		return Permissions{}, fmt.Errorf("%w: site %q is not a DNS label", ErrIdentity, site)
	}
	return Permissions{
		Publish: []string{
			federated.UpdateSubjectPrefix + site,
			federated.StatusSubjectPrefix + site,
			"$JS.API.STREAM.INFO." + stateStream,
			"$JS.API.STREAM.INFO." + modelStream,
			"$JS.API.DIRECT.GET." + stateStream + ".$KV." + federated.StateBucket + ".>",
			"$JS.API.DIRECT.GET." + modelStream,
			"$JS.API.DIRECT.GET." + modelStream + ".$O." + federated.ModelBucket + ".M.>",
		},
		Subscribe: []string{
			federated.AckSubjectPrefix + site,
			"$KV." + federated.StateBucket + ".>",
			SiteInboxPrefix(site) + ".>",
		},
	}, nil
}

// CoordinatorPermissions are the coordinator's: it creates and manages
// the update stream, the state bucket and the model store, pulls updates
// through its durable consumer, writes the bucket and the store, answers
// sites (acks) and the admin API, and reads site reports. It may not
// publish updates (edgesched.update.>) nor read other identities' inboxes.
func CoordinatorPermissions() Permissions {
	var pub []string
	for _, s := range []string{federated.UpdateStream, stateStream, modelStream} {
		pub = append(pub, "$JS.API.STREAM.CREATE."+s, "$JS.API.STREAM.UPDATE."+s, "$JS.API.STREAM.INFO."+s)
	}
	pub = append(pub,
		"$JS.API.INFO",
		// the durable pull consumer "coordinator" on the update stream
		"$JS.API.CONSUMER.CREATE."+federated.UpdateStream+".>",
		"$JS.API.CONSUMER.DURABLE.CREATE."+federated.UpdateStream+".coordinator",
		"$JS.API.CONSUMER.INFO."+federated.UpdateStream+".coordinator",
		"$JS.API.CONSUMER.MSG.NEXT."+federated.UpdateStream+".coordinator",
		"$JS.ACK."+federated.UpdateStream+".>",
		// after a restart: deliver again at once what the previous run
		// fetched and never acked (reset on servers that have it, delete
		// and re-create from the ack floor on older ones)
		"$JS.API.CONSUMER.RESET."+federated.UpdateStream+".coordinator",
		"$JS.API.CONSUMER.DELETE."+federated.UpdateStream+".coordinator",
		// remove the updates it has judged (below its ack floor)
		"$JS.API.STREAM.PURGE."+federated.UpdateStream,
		// the state bucket and the model store: write, read, and purge
		// the chunks of a replaced object
		"$KV."+federated.StateBucket+".>",
		"$O."+federated.ModelBucket+".>",
		"$JS.API.STREAM.PURGE."+modelStream,
		"$JS.API.DIRECT.GET."+stateStream+".>",
		"$JS.API.DIRECT.GET."+modelStream,
		"$JS.API.DIRECT.GET."+modelStream+".>",
		"$JS.API.STREAM.MSG.GET."+stateStream,
		"$JS.API.STREAM.MSG.GET."+modelStream,
		// acks to sites
		federated.AckSubjectPrefix+"*",
	)
	// as replicas (--ha): the lease, the checkpoint pointer and the
	// checkpoints, and a consumer of the update stream per epoch
	// (coordinator-e<epoch>; earlier ones listed and deleted)
	for _, s := range []string{leaseStream, haStream, ckptStream} {
		pub = append(pub, "$JS.API.STREAM.CREATE."+s, "$JS.API.STREAM.UPDATE."+s, "$JS.API.STREAM.INFO."+s,
			"$JS.API.STREAM.MSG.GET."+s, "$JS.API.DIRECT.GET."+s, "$JS.API.DIRECT.GET."+s+".>")
	}
	pub = append(pub,
		"$KV."+federated.LeaseBucket+".>",
		"$KV."+federated.HABucket+".>",
		"$O."+federated.CheckpointBucket+".>",
		"$JS.API.STREAM.PURGE."+ckptStream,
		"$JS.API.CONSUMER.CREATE."+ckptStream+".>",
		"$JS.API.CONSUMER.DELETE."+ckptStream+".>",
		"$JS.API.CONSUMER.NAMES."+federated.UpdateStream,
		"$JS.API.CONSUMER.INFO."+federated.UpdateStream+".*",
		"$JS.API.CONSUMER.MSG.NEXT."+federated.UpdateStream+".*",
		"$JS.API.CONSUMER.DELETE."+federated.UpdateStream+".*",
	)
	// hierarchical rounds (--regions): the regional stream and the
	// durable pull consumer "coordinator" on it
	rs := federated.RegionalStream
	pub = append(pub,
		"$JS.API.STREAM.CREATE."+rs, "$JS.API.STREAM.UPDATE."+rs, "$JS.API.STREAM.INFO."+rs,
		"$JS.API.CONSUMER.CREATE."+rs+".coordinator",
		"$JS.API.CONSUMER.DURABLE.CREATE."+rs+".coordinator",
		"$JS.API.CONSUMER.INFO."+rs+".coordinator",
		"$JS.API.CONSUMER.MSG.NEXT."+rs+".coordinator",
		"$JS.ACK."+rs+".>",
		// as replicas: a consumer of the regional stream per epoch too
		// (coordinator-e<epoch>; earlier ones listed and deleted)
		"$JS.API.CONSUMER.NAMES."+rs,
		"$JS.API.CONSUMER.CREATE."+rs+".*",
		"$JS.API.CONSUMER.INFO."+rs+".*",
		"$JS.API.CONSUMER.MSG.NEXT."+rs+".*",
		"$JS.API.CONSUMER.DELETE."+rs+".*",
	)
	return Permissions{
		Publish: pub,
		Subscribe: []string{
			federated.StatusSubjectPrefix + "*",
			federated.AdminSubjectPrefix + ".>",
			"$SRV.>",
			CoordinatorInboxPrefix + ".>",
		},
		// admin API answers and micro service discovery ($SRV.PING, ...)
		AllowResponses: true,
	}
}

// RegionPermissions are a regional aggregator's (edge-coordinator
// region; docs/federated.md "Hierarchical rounds"), for region and its
// sites, on the region's NATS server and on the root's alike:
//
//   - on the region's server: its own update stream
//     (federated.RegionUpdateStream(region), which takes its sites'
//     subjects) and its durable pull consumer federated.RegionConsumer on
//     it (create, fetch, ack), and acks to its own sites;
//   - on the root's: the round announcement (the state bucket's round key,
//     by direct get), the admin endpoint round.regional, its aggregates on
//     edgesched.regional.REGION (into the regional stream), and, in a
//     round that does not sum, its own sites' verified updates relayed on
//     their subjects;
//   - replies on its own inbox (_INBOX.region.REGION.>).
//
// It may not touch another region's stream, consumer or subject, create
// or read a consumer of the root's update stream, subscribe to any update
// subject, write the state bucket or the model store, or call any other
// admin endpoint. (Its stream's configuration is its own to choose: a
// stream that tried to take a subject another stream takes — the root's
// update stream, another region's — is refused by the server.)
func RegionPermissions(region string, sites []string) (Permissions, error) {
	if !federated.ValidSite(region) {
		return Permissions{}, fmt.Errorf("%w: region %q is not a DNS label", ErrIdentity, region)
	}
	rs, rc := federated.RegionUpdateStream(region), federated.RegionConsumer
	pub := []string{
		"$JS.API.STREAM.CREATE." + rs, "$JS.API.STREAM.UPDATE." + rs, "$JS.API.STREAM.INFO." + rs,
		"$JS.API.CONSUMER.CREATE." + rs + "." + rc,
		"$JS.API.CONSUMER.DURABLE.CREATE." + rs + "." + rc,
		"$JS.API.CONSUMER.INFO." + rs + "." + rc,
		"$JS.API.CONSUMER.MSG.NEXT." + rs + "." + rc,
		"$JS.ACK." + rs + ".>",
		"$JS.API.STREAM.INFO." + stateStream,
		"$JS.API.DIRECT.GET." + stateStream + ".$KV." + federated.StateBucket + "." + federated.KeyRound,
		federated.AdminSubjectPrefix + "." + endpointRegionalRound,
		federated.RegionalSubjectPrefix + region,
	}
	for _, s := range sites {
		if !federated.ValidSite(s) {
			return Permissions{}, fmt.Errorf("%w: region %q: site %q is not a DNS label", ErrIdentity, region, s)
		}
		pub = append(pub, federated.UpdateSubjectPrefix+s, federated.AckSubjectPrefix+s)
	}
	return Permissions{Publish: pub, Subscribe: []string{RegionInboxPrefix(region) + ".>"}}, nil
}

// endpointRegionalRound is the coordinator's admin endpoint a region
// asks for the round (coordinator.EndpointRegionalRound; natsauth does
// not import the coordinator).
const endpointRegionalRound = "round.regional"

// AdminPermissions are the operator's (edgectl): the coordinator's admin
// API and service discovery, read-only JetStream information for
// troubleshooting, and replies on the admin inbox. An admin cannot
// publish updates, write the bucket or the store, or read any stream's
// messages.
func AdminPermissions() Permissions {
	return Permissions{
		Publish: []string{
			federated.AdminSubjectPrefix + ".>",
			"$SRV.>",
			"$JS.API.INFO",
			"$JS.API.STREAM.NAMES",
			"$JS.API.STREAM.LIST",
			"$JS.API.STREAM.INFO.*",
			"$JS.API.CONSUMER.NAMES.*",
			"$JS.API.CONSUMER.LIST.*",
			"$JS.API.CONSUMER.INFO.*.*",
		},
		Subscribe: []string{AdminInboxPrefix + ".>"},
	}
}
