package nlp

import (
	"slices"
	"strings"
)

// Glossary holds the names the compiler may place: services (with
// aliases, English or Chinese), zones and GPU models. The zero value knows
// no names; DefaultGlossary knows common ones.
type Glossary struct {
	// Services maps a canonical service name to its aliases.
	Services map[string][]string
	// Zones and GPUModels are canonical names (GPU models match
	// case-insensitively and compile to the spelling given here).
	Zones     []string
	GPUModels []string
}

// DefaultGlossary returns common microservice names with Chinese names,
// and common GPU models.
func DefaultGlossary() *Glossary {
	return &Glossary{
		Services: map[string][]string{
			"payment": {"payments", "支付"}, "orders": {"order", "订单"}, "checkout": {"结账", "结算"},
			"cart": {"购物车"}, "frontend": {"前端"}, "catalog": {"商品目录", "目录"}, "shipping": {"物流", "配送"},
			"email": {"邮件"}, "recommendation": {"recommendations", "推荐"}, "ads": {"广告"},
			"currency": {"汇率"}, "search": {"搜索"}, "inventory": {"库存"}, "auth": {"认证"},
			"database": {"databases", "数据库"}, "cache": {"缓存"}, "batch": {"批处理"}, "gateway": {"网关"},
			"logging": {"日志"}, "monitoring": {"监控"}, "video": {"视频"}, "inference": {"推理"},
			"redis": nil, "postgres": nil, "kafka": nil, "nginx": nil, "web": nil, "worker": {"workers"},
			"analytics": {"分析"}, "camera": {"cameras", "摄像头"}, "reports": {"报表"}, "backup": {"backups", "备份"},
			"training": {"训练"}, "ingest": {"采集"},
		},
		GPUModels: []string{"A10", "A100", "A30", "A40", "H100", "L4", "L40", "T4", "V100", "P100", "P4", "Orin", "Xavier"},
	}
}

// Add merges other's names into g (g's Services map is copied first).
func (g *Glossary) Add(other *Glossary) *Glossary {
	out := &Glossary{Services: map[string][]string{}}
	for _, src := range []*Glossary{g, other} {
		if src == nil {
			continue
		}
		for k, v := range src.Services {
			out.Services[k] = append(out.Services[k], v...)
		}
		for _, z := range src.Zones {
			if !slices.Contains(out.Zones, z) {
				out.Zones = append(out.Zones, z)
			}
		}
		for _, m := range src.GPUModels {
			if !slices.ContainsFunc(out.GPUModels, func(x string) bool { return strings.EqualFold(x, m) }) {
				out.GPUModels = append(out.GPUModels, m)
			}
		}
	}
	return out
}

// lookup classifies a lowercase name: its token and canonical value.
func (g *Glossary) lookup(w string) (tk, string) {
	if g == nil {
		return tUnknown, ""
	}
	if _, ok := g.Services[w]; ok {
		return tService, w
	}
	for k, al := range g.Services {
		if slices.Contains(al, w) {
			return tService, k
		}
	}
	for _, z := range g.Zones {
		if strings.EqualFold(z, w) {
			return tZoneName, z
		}
	}
	for _, m := range g.GPUModels {
		if strings.EqualFold(m, w) {
			return tGPUModel, m
		}
	}
	return tUnknown, ""
}

// chineseNames returns the glossary's non-ASCII aliases for the Chinese
// longest-match tokenizer.
func (g *Glossary) chineseNames() map[string]string {
	out := map[string]string{}
	if g == nil {
		return out
	}
	for k, al := range g.Services {
		for _, a := range al {
			if !isASCII(a) {
				out[a] = k
			}
		}
	}
	return out
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}
