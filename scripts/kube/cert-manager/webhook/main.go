// cert-manager's webhook for moco-rs's tests: cert-manager's own webhook server
// (internal/webhook) with its own flags (pkg/webhook/options), run as the image
// quay.io/jetstack/cert-manager-webhook runs it. Built by scripts/kube/build.sh.
package main

import (
	"context"
	"fmt"

	"github.com/spf13/pflag"

	"github.com/cert-manager/cert-manager/internal/apis/config/webhook/validation"
	cmwebhook "github.com/cert-manager/cert-manager/internal/webhook"
	logf "github.com/cert-manager/cert-manager/pkg/logs"
	"github.com/cert-manager/cert-manager/pkg/util/configfile"
	utilfeature "github.com/cert-manager/cert-manager/pkg/util/feature"
	webhookconfigfile "github.com/cert-manager/cert-manager/pkg/webhook/configfile"
	"github.com/cert-manager/cert-manager/pkg/webhook/options"

	"github.com/cert-manager/cert-manager/moco-rs-wrapper/cli"
)

func main() {
	cfg, err := options.NewWebhookConfiguration()
	if err != nil {
		panic(err)
	}
	cli.Main(cli.Command{
		Name: "webhook",
		Bind: func(fs *pflag.FlagSet) { options.AddConfigFlags(fs, cfg) },
		Load: func(load func(configfile.ConfigFile) error) error {
			f := webhookconfigfile.New()
			if err := load(f); err != nil {
				return err
			}
			f.Config.DeepCopyInto(cfg)
			return nil
		},
		Check: func() error {
			if err := utilfeature.DefaultMutableFeatureGate.SetFromMap(cfg.FeatureGates); err != nil {
				return fmt.Errorf("feature gates: %w", err)
			}
			if errs := validation.ValidateWebhookConfiguration(cfg, nil); len(errs) > 0 {
				return errs.ToAggregate()
			}
			return logf.ValidateAndApply(&cfg.Logging)
		},
		Run: func(ctx context.Context) error {
			srv, err := cmwebhook.NewCertManagerWebhookServer(logf.FromContext(ctx), *cfg)
			if err != nil {
				return err
			}
			return srv.Run(ctx)
		},
	})
}
