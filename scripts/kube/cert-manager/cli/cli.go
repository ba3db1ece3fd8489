// Package cli is what the three cert-manager commands of moco-rs's tests share: the flags,
// with an optional --config file that the flags given beside it override (as cert-manager's
// own commands do), --version, logging, and exiting on SIGTERM. The commands themselves are
// in ../controller, ../cainjector and ../webhook; everything they run is cert-manager's.
package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/pflag"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/cert-manager/cert-manager/internal/cmd/util"
	logf "github.com/cert-manager/cert-manager/pkg/logs"
	cmutil "github.com/cert-manager/cert-manager/pkg/util"
	"github.com/cert-manager/cert-manager/pkg/util/configfile"
)

// Command is one cert-manager component.
type Command struct {
	// Name is the component's name (logs, usage).
	Name string
	// Bind adds the component's flags, bound to its configuration.
	Bind func(fs *pflag.FlagSet)
	// Load reads a configuration file, through load, into the configuration.
	Load func(load func(configfile.ConfigFile) error) error
	// Check validates the configuration once flags and file are read, and applies it (feature
	// gates, logging).
	Check func() error
	// Run runs the component until ctx ends.
	Run func(ctx context.Context) error
}

func parse(c Command, args []string) (config string, version bool, err error) {
	fs := pflag.NewFlagSet(c.Name, pflag.ContinueOnError)
	fs.StringVar(&config, "config", "", "a file holding the component's configuration object; flags given with it override it")
	fs.BoolVar(&version, "version", false, "print the version and exit")
	c.Bind(fs)
	err = fs.Parse(args)
	return config, version, err
}

// Main parses os.Args, runs the command and exits.
func Main(c Command) {
	logf.InitLogs()
	args := os.Args[1:]
	config, version, err := parse(c, args)
	if err != nil {
		fail(c.Name, err)
	}
	if version {
		v := cmutil.VersionInfo()
		fmt.Printf("cert-manager %s %s (%s, %s)\n", c.Name, v.GitVersion, v.GoVersion, v.Platform)
		return
	}
	if config != "" {
		path, err := filepath.Abs(config)
		if err != nil {
			fail(c.Name, err)
		}
		loader, err := configfile.NewConfigurationFSLoader(nil, path)
		if err != nil {
			fail(c.Name, fmt.Errorf("config file %s: %w", path, err))
		}
		if err := c.Load(loader.Load); err != nil {
			fail(c.Name, fmt.Errorf("config file %s: %w", path, err))
		}
		// The file replaced the configuration: the flags given beside it win again.
		if _, _, err := parse(c, args); err != nil {
			fail(c.Name, err)
		}
	}
	if err := c.Check(); err != nil {
		fail(c.Name, err)
	}

	ctx, exit := util.SetupExitHandler(context.Background(), util.GracefulShutdown)
	ctrl.SetLogger(logf.Log)
	ctx = logf.NewContext(ctx, logf.Log, c.Name)
	v := cmutil.VersionInfo()
	logf.Log.Info("starting cert-manager "+c.Name, "version", v.GitVersion, "go_version", v.GoVersion)
	err = c.Run(ctx)
	if err != nil && !errors.Is(err, context.Canceled) {
		logf.Log.Error(err, "cert-manager "+c.Name+" failed")
	}
	logf.FlushLogs()
	util.SetExitCode(err)
	exit()
}

func fail(name string, err error) {
	fmt.Fprintf(os.Stderr, "cert-manager %s: %v\n", name, err)
	os.Exit(2)
}
