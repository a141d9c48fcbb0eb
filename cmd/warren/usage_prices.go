package main

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/warrenhq/warren/metering"
)

// runUsagePrices prints the price table records are costed with: the
// config's metering.prices, which replaces the built-in table whole, or the
// built-in one. With --model it says which entry prices that model, matched
// as the server matches it (case, provider prefix, dated snapshots).
func runUsagePrices(c *cli.Context) error {
	dir, err := dataDir(c)
	if err != nil {
		return err
	}
	cfg, err := loadConfig(c, dir)
	if err != nil {
		return err
	}
	prices, builtIn := cfg.Metering.PriceTable()
	source := "the config's metering.prices (" + cfg.path + ")"
	if builtIn {
		source = "the built-in table"
	}
	out := c.App.Writer
	if model := c.String("model"); model != "" {
		return printModelPrice(out, c.Bool("json"), prices, model, source, cfg.path)
	}
	if c.Bool("json") {
		return writeJSON(out, map[string]any{"prices": prices})
	}
	if builtIn {
		fmt.Fprintf(out, "Built-in prices, USD per million tokens. To change them, copy 'warren usage prices --json'\n"+
			"into the metering section of %s and edit it: that table then replaces this one.\n\n", cfg.path)
	} else {
		fmt.Fprintf(out, "Prices from %s, USD per million tokens\n(they replace the built-in table; models not listed cost 0 and are reported as unpriced).\n\n", cfg.path)
	}
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "MODEL\t  INPUT\t OUTPUT\t CACHED\n")
	for _, m := range slices.Sorted(maps.Keys(prices)) {
		p := prices[m]
		fmt.Fprintf(w, "%s\t%7.3f\t%7.3f\t%7s\n", m, p.Input, p.Output, cachedPrice(p))
	}
	return w.Flush()
}

// printModelPrice says which entry of prices prices model. An unpriced
// model exits 1, with what to do about it.
func printModelPrice(out io.Writer, asJSON bool, prices map[string]metering.Price, model, source, cfgPath string) error {
	key, p, ok := metering.MatchPrice(prices, model)
	if asJSON {
		v := map[string]any{"model": model, "priced": ok}
		if ok {
			v["priced_as"], v["price"] = key, p
		}
		if err := writeJSON(out, v); err != nil || ok {
			return err
		}
		return cli.Exit(fmt.Sprintf("%s has no price in %s (add it to metering.prices in %s)", model, source, cfgPath), 1)
	}
	if !ok {
		return cli.Exit(fmt.Sprintf("%s has no price in %s: its records cost 0 and reports list it under unpriced_models; "+
			"add it to metering.prices in %s (with every other model you use: that table replaces the built-in one)",
			model, source, cfgPath), 1)
	}
	fmt.Fprintf(out, "%s is priced as %s (from %s): input %.3f, output %.3f, cached %s USD per million tokens\n",
		model, key, source, p.Input, p.Output, cachedPrice(p))
	return nil
}

// cachedPrice shows a cached-token price; 0 bills them at the input price.
func cachedPrice(p metering.Price) string {
	if p.Cached == 0 {
		return "= input"
	}
	return fmt.Sprintf("%.3f", p.Cached)
}
