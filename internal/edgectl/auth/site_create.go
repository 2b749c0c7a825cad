package auth

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/edgesched/edgesched/federated/natsauth"
)

func newAuthSiteCreateCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "create NAME",
		Short: "Create a site's credentials: NKey, update-signing key, NATS user",
		Long: `create makes a site's credentials in the fleet directory:

  secrets/sites/NAME/nats.nk    its NATS NKey seed (mode 0600)
  secrets/sites/NAME/NAME.key   its update-signing ed25519 key (mode 0600)
  sites/NAME.pub                the update key's public half (edge-coordinator --sites)

and adds its NATS user to the authorization block, with permissions to
publish only its own updates and status, read only its own acks and
inbox, and read (never write) the round state and the models. It prints
the user's entry. Ship the two secret files to the site, then delete them
here. A revoked name is not reused.

With --region the site sends its updates to that region's aggregator
(edge-coordinator region; docs/federated.md "Hierarchical rounds"). The
region's NATS identity is made with its first site:

  secrets/regions/REGION/nats.nk  the aggregator's NKey seed (mode 0600)

and its NATS user may use only its own update stream and consumer, read
the round announcement and ask round.regional, publish its aggregate on
edgesched.regional.REGION, and relay and ack its own sites' updates
(docs/security.md). Put the same authorization block on the region's
NATS server as on the root's.`,
		Example: `  edgectl auth site create store-1 --dir fleet
  edgectl auth site create store-7 --region eu --dir fleet`,
		Args: cobra.ExactArgs(1),
	}
	dir := fleetDir(cmd)
	region := cmd.Flags().String("region", "", "the site's region (hierarchical rounds): its aggregator's NATS identity is made with its first site")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		d := dir()
		c, err := d.CreateRegionalSite(args[0], *region)
		if err != nil {
			return err
		}
		w := cmd.OutOrStdout()
		fmt.Fprintf(w, "site %s\n", c.Site.Name)
		fmt.Fprintf(w, "nkey        %s\n", c.Site.NKey)
		fmt.Fprintf(w, "update key  %s\n", c.Site.UpdateKey)
		fmt.Fprintf(w, "ship to the site (mode 0600), then delete here:\n  %s\n  %s\n", c.Seed, c.UpdateKey)
		fmt.Fprintf(w, "coordinator's copy: %s\n", c.UpdatePub)
		fmt.Fprintf(w, "the site's agent connects with that NKey, inbox prefix %s and the CA, signs updates with that key\n"+
			"and trusts the models signed by the keys in %s\n", natsauth.SiteInboxPrefix(c.Site.Name), d.File(natsauth.ModelKeysDir))
		fmt.Fprintf(w, "\nNATS user (in %s):\n%s", d.File(natsauth.AuthConfFile), c.Snippet)
		if c.Region != nil {
			fmt.Fprintf(w, "\nregion %s\nnkey        %s\n", c.Region.Name, c.Region.NKey)
			if c.RegionSeed != "" {
				fmt.Fprintf(w, "ship to the region's aggregator (mode 0600), then delete here:\n  %s\n", c.RegionSeed)
			}
			fmt.Fprintf(w, "the aggregator connects (edge-coordinator region --region %s --nkey ...) with inbox prefix %s\n",
				c.Region.Name, natsauth.RegionInboxPrefix(c.Region.Name))
			fmt.Fprintf(w, "\nNATS user (in %s, on the root's and the region's servers):\n%s", d.File(natsauth.AuthConfFile), c.RegionSnippet)
		}
		reloadHint(w, d, true)
		return nil
	}
	return cmd
}
