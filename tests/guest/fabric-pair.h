/* SPDX-License-Identifier: GPL-2.0-only OR MIT */
/*
 * The common set-up of the libfabric provider's guest programs (exanest-fabric, exanest-fi-bw):
 * an RDM endpoint with its fabric, domain, address vector (map) and tagged completion queue,
 * and a pair of them on the guest's two engines, each with the other's address (exchanged in
 * process). Built against Debian's libfabric 1.17 (scripts/build-initramfs.sh).
 */
#ifndef EXANEST_FABRIC_PAIR_H
#define EXANEST_FABRIC_PAIR_H

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <stdint.h>
#include <string.h>

#define STASH 64

struct side {
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *dom;
	struct fid_av *av;
	struct fid_cq *cq;
	struct fid_ep *ep;
	fi_addr_t peer;
	/* exanest-fabric's: completions read while waiting for the other side's. */
	struct fi_cq_tagged_entry stash[STASH];
	int n;
};

/* Open @s on the domain of @info: 0, or -1 (close_side() closes what was opened). */
static inline int open_side(struct side *s, struct fi_info *info)
{
	struct fi_cq_attr cq_attr = { .format = FI_CQ_FORMAT_TAGGED, .wait_obj = FI_WAIT_NONE };
	struct fi_av_attr av_attr = { .type = FI_AV_MAP };

	s->info = fi_dupinfo(info);
	if (fi_fabric(info->fabric_attr, &s->fabric, NULL) ||
	    fi_domain(s->fabric, info, &s->dom, NULL) ||
	    fi_cq_open(s->dom, &cq_attr, &s->cq, NULL) ||
	    fi_av_open(s->dom, &av_attr, &s->av, NULL) ||
	    fi_endpoint(s->dom, info, &s->ep, NULL) ||
	    fi_ep_bind(s->ep, &s->av->fid, 0) ||
	    fi_ep_bind(s->ep, &s->cq->fid, FI_TRANSMIT | FI_RECV) ||
	    fi_enable(s->ep))
		return -1;
	return 0;
}

/* Close what open_side() opened of @s, and clear it. */
static inline void close_side(struct side *s)
{
	if (s->ep)
		fi_close(&s->ep->fid);
	if (s->av)
		fi_close(&s->av->fid);
	if (s->cq)
		fi_close(&s->cq->fid);
	if (s->dom)
		fi_close(&s->dom->fid);
	if (s->fabric)
		fi_close(&s->fabric->fid);
	fi_freeinfo(s->info);
	memset(s, 0, sizeof(*s));
}

/*
 * Open @s[0] and @s[1] on two domains of different nodes (the guest's two engines), with
 * @caps and @mr_mode asked of fi_getinfo, each with the other's 8-byte address: NULL, or the
 * step that failed.
 */
static inline const char *open_pair(struct side s[2], uint64_t caps, uint64_t mr_mode)
{
	struct fi_info *hints = fi_allocinfo(), *list, *i, *pick[2] = { NULL, NULL };
	const char *why = NULL;
	char name[2][16];
	size_t len;
	int k;

	memset(s, 0, 2 * sizeof(*s));
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = caps;
	hints->domain_attr->mr_mode = mr_mode;
	hints->fabric_attr->prov_name = strdup("exanest");
	if (fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &list)) {
		fi_freeinfo(hints);
		return "fi_getinfo";
	}
	fi_freeinfo(hints);
	for (i = list; i; i = i->next) {
		if (!pick[0])
			pick[0] = i;
		else if (!pick[1] && memcmp(i->src_addr, pick[0]->src_addr, 4))
			pick[1] = i;
	}
	if (!pick[1])
		why = "fi_getinfo found no second node's domain";
	for (k = 0; !why && k < 2; k++)
		if (open_side(&s[k], pick[k]))
			why = "opening an endpoint";
	for (k = 0; !why && k < 2; k++) {
		len = sizeof(name[k]);
		if (fi_getname(&s[k].ep->fid, name[k], &len) || len != 8)
			why = "fi_getname";
	}
	for (k = 0; !why && k < 2; k++)
		if (fi_av_insert(s[k].av, name[!k], 1, &s[k].peer, 0, NULL) != 1)
			why = "fi_av_insert";
	fi_freeinfo(list);
	return why;
}

#endif
