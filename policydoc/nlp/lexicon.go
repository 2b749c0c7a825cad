package nlp

// tk is a token's type.
type tk int

const (
	tUnknown tk = iota
	tFiller
	tReq      // must, always, 必须
	tOnly     // only, 只能
	tNeg      // never, do not, 不得 (a hard "not")
	tPref     // prefer, try to, 尽量
	tAvoid    // avoid, try not to, 避免 (a soft "not")
	tShould   // should, 应该: hard or soft? ambiguous
	tStrength // strongly (80), slightly (20)
	tWeight   // "weight", 权重: the number after it
	tSame
	tDiff
	tSpread
	tNear // near, close to: node or zone? ambiguous
	tOr   // or, 或者: ambiguous
	tScopeNode
	tScopeZone
	tPer
	tAtMost // at most, no more than, 最多, 不超过
	tUnder  // under, below, 低于
	tAbove  // above, over, more than, 超过, 高于
	tNumber
	tPercent
	tPercentWord // "percent", "百分之" (before or after a number)
	tCarbonUnit
	tTime
	tAM // am, 早上, 上午, 凌晨
	tPM // pm, 下午, 晚上 (before a time)
	tOClock
	tAnd
	tCPU
	tCarbonWord
	tLowCarbon
	tHighCarbon
	tNight
	tDay
	tReplica
	tArch
	tGPUModel
	tGPU
	tLabel
	tZoneName
	tService
	tServiceMarker
	tAll
	tIdent    // an ASCII name not (yet) placed
	tPunct    // clause punctuation inside a clause (commas)
	tOpenTime // after, before, until: half a range of hours
)

var tkNames = map[tk]string{
	tUnknown: "unknown word", tFiller: "filler", tReq: "'must'", tOnly: "'only'", tNeg: "a negation",
	tPref: "'prefer'", tAvoid: "'avoid'", tShould: "'should'", tStrength: "a strength", tWeight: "'weight'",
	tSame: "'same'", tDiff: "'different'", tSpread: "'spread'", tNear: "'near'", tOr: "'or'",
	tScopeNode: "'node'", tScopeZone: "'zone'", tPer: "'per'", tAtMost: "'at most'", tUnder: "'under'",
	tAbove: "'above'", tNumber: "a number", tPercent: "a percentage", tPercentWord: "'percent'",
	tCarbonUnit: "gCO2/kWh", tTime: "a time", tAM: "'am'", tPM: "'pm'", tOClock: "'o'clock'", tAnd: "'and'",
	tCPU: "'CPU'", tCarbonWord: "'grid'/'carbon'", tLowCarbon: "'low-carbon'", tHighCarbon: "'coal-heavy'",
	tNight: "'at night'", tDay: "'during the day'", tReplica: "'replicas'", tArch: "an architecture",
	tGPUModel: "a GPU model", tGPU: "'GPU'", tLabel: "a label key=value", tZoneName: "a zone",
	tService: "a service", tServiceMarker: "'service'", tAll: "'all pods'", tIdent: "a name", tPunct: "','",
}

// entry is a lexicon entry: a token type and, for some, a value.
type entry struct {
	t tk
	v float64
	s string
}

// Night and day as hour ranges (documented in docs/policy-language.md).
const (
	nightFrom, nightTo = 22, 6
	dayFrom, dayTo     = 6, 22
)

// english maps lowercase words and phrases (space-separated) to tokens.
var english = map[string]entry{
	// fillers
	"the": {t: tFiller}, "a": {t: tFiller}, "an": {t: tFiller}, "of": {t: tFiller}, "in": {t: tFiller},
	"on": {t: tFiller}, "to": {t: tFiller}, "be": {t: tFiller}, "please": {t: tFiller}, "its": {t: tFiller},
	"their": {t: tFiller}, "for": {t: tFiller}, "with": {t: tFiller}, "as": {t: tFiller}, "is": {t: tFiller},
	"are": {t: tFiller}, "that": {t: tFiller}, "keep": {t: tFiller}, "put": {t: tFiller}, "place": {t: tFiller},
	"run": {t: tFiller}, "running": {t: tFiller}, "schedule": {t: tFiller}, "scheduling": {t: tFiller},
	"deploy": {t: tFiller}, "deploying": {t: tFiller}, "placing": {t: tFiller}, "putting": {t: tFiller},
	"land": {t: tFiller}, "go": {t: tFiller}, "stay": {t: tFiller}, "use": {t: tFiller}, "using": {t: tFiller},
	"let": {t: tFiller}, "have": {t: tFiller}, "at": {t: tFiller}, "any": {t: tFiller}, "anywhere": {t: tFiller}, "one's": {t: tFiller},
	"we": {t: tFiller}, "want": {t: tFiller}, "from": {t: tFiller}, "between": {t: tFiller}, "across": {t: tFiller},
	"over": {t: tAbove}, "into": {t: tFiller}, "onto": {t: tFiller}, "there": {t: tFiller},
	"after": {t: tOpenTime}, "before": {t: tOpenTime}, "until": {t: tOpenTime}, "till": {t: tOpenTime}, "since": {t: tOpenTime}, "it": {t: tFiller},
	"they": {t: tFiller}, "them": {t: tFiller}, "each other": {t: tFiller}, "together with": {t: tSame},
	"placed": {t: tFiller}, "scheduled": {t: tFiller}, "deployed": {t: tFiller}, "allowed": {t: tFiller},
	"within": {t: tFiller}, "by": {t: tFiller}, "whose": {t: tFiller}, "where": {t: tFiller}, "when": {t: tFiller},
	"make sure": {t: tFiller}, "ensure": {t: tFiller}, "so": {t: tFiller}, "load": {t: tFiller},
	"requested": {t: tFiller}, "request": {t: tFiller}, "requests": {t: tFiller}, "hours": {t: tFiller},
	"get": {t: tFiller}, "of them": {t: tFiller}, "both": {t: tFiller}, "than": {t: tFiller},
	"up": {t: tFiller}, "only be": {t: tOnly}, "exclusively": {t: tOnly},
	// modality
	"must": {t: tReq}, "always": {t: tReq}, "has to": {t: tReq}, "have to": {t: tReq}, "required": {t: tReq},
	"only": {t: tOnly}, "never": {t: tNeg}, "do not": {t: tNeg}, "don't": {t: tNeg}, "must not": {t: tNeg},
	"must never": {t: tNeg}, "cannot": {t: tNeg}, "can't": {t: tNeg}, "not": {t: tNeg}, "no": {t: tNeg},
	"forbid": {t: tNeg}, "outside": {t: tNeg}, "outside of": {t: tNeg}, "except": {t: tNeg}, "except in": {t: tNeg}, "prefer": {t: tPref}, "preferably": {t: tPref}, "ideally": {t: tPref},
	"try to": {t: tPref}, "if possible": {t: tPref}, "where possible": {t: tPref}, "favour": {t: tPref},
	"favor": {t: tPref}, "preferred": {t: tPref}, "avoid": {t: tAvoid}, "try not to": {t: tAvoid},
	"prefer not to": {t: tAvoid}, "should": {t: tShould}, "should not": {t: tShould}, "shouldn't": {t: tShould},
	"strongly": {t: tStrength, v: 80}, "slightly": {t: tStrength, v: 20}, "weakly": {t: tStrength, v: 20},
	"weight": {t: tWeight},
	// relations
	"same": {t: tSame}, "together": {t: tSame}, "co-locate": {t: tSame}, "colocate": {t: tSame},
	"co-located": {t: tSame}, "colocated": {t: tSame}, "alongside": {t: tSame},
	"different": {t: tDiff}, "apart": {t: tDiff}, "separate": {t: tDiff}, "separated": {t: tDiff},
	"away from": {t: tDiff}, "spread": {t: tSpread}, "spread out": {t: tSpread}, "near": {t: tNear},
	"close to": {t: tNear}, "next to": {t: tNear}, "or": {t: tOr}, "either": {t: tOr},
	// scopes
	"node": {t: tScopeNode}, "nodes": {t: tScopeNode}, "host": {t: tScopeNode}, "hosts": {t: tScopeNode},
	"machine": {t: tScopeNode}, "machines": {t: tScopeNode}, "server": {t: tScopeNode}, "servers": {t: tScopeNode},
	"one node": {t: tScopeNode}, "a single node": {t: tScopeNode}, "boards": {t: tScopeNode}, "board": {t: tScopeNode},
	"zone": {t: tScopeZone}, "zones": {t: tScopeZone}, "site": {t: tScopeZone}, "sites": {t: tScopeZone},
	"one zone": {t: tScopeZone}, "region": {t: tScopeZone},
	"per": {t: tPer}, "each": {t: tPer}, "every": {t: tPer}, "any one": {t: tPer},
	// thresholds
	"at most": {t: tAtMost}, "no more than": {t: tAtMost}, "up to": {t: tAtMost}, "not more than": {t: tAtMost},
	"under": {t: tUnder}, "below": {t: tUnder}, "less than": {t: tUnder}, "at or under": {t: tUnder},
	"at or below": {t: tUnder}, "beneath": {t: tUnder}, "lower than": {t: tUnder},
	"above": {t: tAbove}, "more than": {t: tAbove}, "higher than": {t: tAbove}, "exceeding": {t: tAbove},
	"exceed": {t: tAbove}, "greater than": {t: tAbove},
	"percent": {t: tPercentWord}, "per cent": {t: tPercentWord},
	"gco2/kwh": {t: tCarbonUnit}, "g/kwh": {t: tCarbonUnit}, "gco2 per kwh": {t: tCarbonUnit},
	"grams per kwh": {t: tCarbonUnit}, "g per kwh": {t: tCarbonUnit}, "grams of co2 per kwh": {t: tCarbonUnit},
	"am": {t: tAM}, "a.m.": {t: tAM}, "pm": {t: tPM}, "p.m.": {t: tPM}, "o'clock": {t: tOClock},
	"midnight": {t: tTime, v: 0}, "noon": {t: tTime, v: 12}, "midday": {t: tTime, v: 12},
	"and": {t: tAnd}, "&": {t: tAnd}, "as well as": {t: tAnd},
	// resources and carbon
	"cpu": {t: tCPU}, "cpu utilisation": {t: tCPU}, "cpu utilization": {t: tCPU}, "cpu usage": {t: tCPU},
	"utilisation": {t: tCPU}, "utilization": {t: tCPU}, "cpu load": {t: tCPU}, "busy": {t: tCPU},
	"grid": {t: tCarbonWord}, "grids": {t: tCarbonWord}, "carbon": {t: tCarbonWord}, "carbon intensity": {t: tCarbonWord},
	"power": {t: tCarbonWord}, "electricity": {t: tCarbonWord},
	"low-carbon": {t: tLowCarbon}, "low carbon": {t: tLowCarbon}, "green": {t: tLowCarbon}, "greener": {t: tLowCarbon},
	"greenest": {t: tLowCarbon}, "clean": {t: tLowCarbon}, "cleaner": {t: tLowCarbon}, "cleanest": {t: tLowCarbon},
	"coal-heavy": {t: tHighCarbon}, "coal heavy": {t: tHighCarbon}, "dirty": {t: tHighCarbon}, "dirtier": {t: tHighCarbon},
	"high-carbon": {t: tHighCarbon}, "high carbon": {t: tHighCarbon}, "carbon-heavy": {t: tHighCarbon},
	"night": {t: tNight}, "at night": {t: tNight}, "overnight": {t: tNight}, "nights": {t: tNight}, "tonight": {t: tNight},
	"during the night": {t: tNight}, "daytime": {t: tDay}, "during the day": {t: tDay}, "by day": {t: tDay},
	// pods
	"replica": {t: tReplica}, "replicas": {t: tReplica}, "copies": {t: tReplica}, "copy": {t: tReplica},
	"instance": {t: tReplica}, "instances": {t: tReplica},
	"amd64": {t: tArch, s: "amd64"}, "x86": {t: tArch, s: "amd64"}, "x86_64": {t: tArch, s: "amd64"},
	"x86-64": {t: tArch, s: "amd64"}, "intel": {t: tArch, s: "amd64"}, "arm64": {t: tArch, s: "arm64"},
	"arm": {t: tArch, s: "arm64"}, "aarch64": {t: tArch, s: "arm64"},
	"gpu": {t: tGPU}, "gpus": {t: tGPU}, "gpu pods": {t: tGPU}, "gpu jobs": {t: tGPU}, "gpu workloads": {t: tGPU},
	"gpu pod": {t: tGPU}, "gpu job": {t: tGPU}, "gpu work": {t: tGPU}, "gpu boards": {t: tGPU}, "cards": {t: tGPU},
	"service": {t: tServiceMarker}, "services": {t: tServiceMarker}, "app": {t: tServiceMarker},
	"pods": {t: tFiller}, "pod": {t: tFiller}, "workloads": {t: tFiller}, "jobs": {t: tFiller},
	"all pods": {t: tAll}, "every pod": {t: tAll}, "all workloads": {t: tAll}, "everything": {t: tAll},
	"anything": {t: tAll}, "all": {t: tAll}, "all jobs": {t: tAll},
	"g": {t: tCarbonUnit}, "grams": {t: tCarbonUnit}, "gco2": {t: tCarbonUnit},
	"labelled": {t: tFiller}, "labeled": {t: tFiller}, "label": {t: tFiller}, "tagged": {t: tFiller},
	// numbers
	"zero": {t: tNumber, v: 0}, "one": {t: tNumber, v: 1}, "two": {t: tNumber, v: 2}, "three": {t: tNumber, v: 3},
	"four": {t: tNumber, v: 4}, "five": {t: tNumber, v: 5}, "six": {t: tNumber, v: 6}, "seven": {t: tNumber, v: 7},
	"eight": {t: tNumber, v: 8}, "nine": {t: tNumber, v: 9}, "ten": {t: tNumber, v: 10}, "eleven": {t: tNumber, v: 11},
	"twelve": {t: tNumber, v: 12}, "twenty": {t: tNumber, v: 20}, "thirty": {t: tNumber, v: 30},
	"forty": {t: tNumber, v: 40}, "fifty": {t: tNumber, v: 50}, "sixty": {t: tNumber, v: 60},
	"seventy": {t: tNumber, v: 70}, "eighty": {t: tNumber, v: 80}, "ninety": {t: tNumber, v: 90},
	"hundred": {t: tNumber, v: 100}, "a hundred": {t: tNumber, v: 100},
	"single": {t: tNumber, v: 1}, "twice": {t: tUnknown},
}

// chinese maps words to tokens; the tokenizer matches the longest.
var chinese = map[string]entry{
	// fillers
	"的": {t: tFiller}, "在": {t: tFiller}, "上": {t: tFiller}, "把": {t: tFiller}, "将": {t: tFiller},
	"请": {t: tFiller}, "里": {t: tFiller}, "中": {t: tFiller}, "内": {t: tFiller}, "放": {t: tFiller},
	"放在": {t: tFiller}, "放到": {t: tFiller}, "部署": {t: tFiller}, "部署在": {t: tFiller}, "运行": {t: tFiller},
	"运行在": {t: tFiller}, "调度": {t: tFiller}, "调度到": {t: tFiller}, "调度在": {t: tFiller}, "让": {t: tFiller},
	"使用": {t: tFiller}, "用": {t: tFiller}, "个": {t: tFiller}, "台": {t: tFiller}, "之间": {t: tFiller},
	"时": {t: tFiller}, "跑": {t: tFiller}, "跑在": {t: tFiller}, "保持": {t: tFiller}, "要": {t: tFiller},
	"都": {t: tFiller}, "位于": {t: tFiller}, "带": {t: tFiller}, "带有": {t: tFiller}, "标签": {t: tFiller},
	"有": {t: tFiller}, "它们": {t: tFiller}, "到": {t: tFiller}, "至": {t: tFiller}, "从": {t: tFiller},
	"期间": {t: tFiller}, "请求": {t: tFiller}, "负载": {t: tFiller}, "机": {t: tFiller}, "安排": {t: tFiller},
	"安排在": {t: tFiller}, "上面": {t: tFiller}, "下": {t: tFiller}, "得": {t: tFiller}, "会": {t: tFiller},
	"（": {t: tFiller}, "）": {t: tFiller}, "：": {t: tFiller}, "“": {t: tFiller}, "”": {t: tFiller}, "%": {t: tPercentWord}, "％": {t: tPercentWord},
	"以后": {t: tOpenTime}, "之后": {t: tOpenTime}, "以前": {t: tOpenTime}, "之前": {t: tOpenTime}, "直到": {t: tOpenTime},
	"只在": {t: tOnly}, "仅在": {t: tOnly}, "只": {t: tOnly}, "只能": {t: tOnly}, "仅": {t: tOnly}, "仅能": {t: tOnly},
	// modality
	"必须": {t: tReq}, "一定要": {t: tReq}, "务必": {t: tReq}, "总是": {t: tReq}, "始终": {t: tReq},
	"不得": {t: tNeg}, "不能": {t: tNeg}, "不要": {t: tNeg}, "禁止": {t: tNeg}, "绝不": {t: tNeg},
	"永远不要": {t: tNeg}, "别": {t: tNeg}, "不可": {t: tNeg}, "不许": {t: tNeg}, "不准": {t: tNeg}, "不": {t: tNeg},
	"决不": {t: tNeg}, "不允许": {t: tNeg},
	"尽量": {t: tPref}, "优先": {t: tPref}, "最好": {t: tPref}, "尽可能": {t: tPref}, "偏好": {t: tPref},
	"倾向于": {t: tPref}, "优先考虑": {t: tPref}, "避免": {t: tAvoid}, "尽量不": {t: tAvoid},
	"应该": {t: tShould}, "应当": {t: tShould}, "应": {t: tShould},
	"强烈": {t: tStrength, v: 80}, "稍微": {t: tStrength, v: 20}, "略微": {t: tStrength, v: 20}, "权重": {t: tWeight},
	// relations
	"同一个": {t: tSame}, "同一": {t: tSame}, "同一台": {t: tSame}, "一起": {t: tSame}, "相同": {t: tSame},
	"相同的": {t: tSame}, "同": {t: tSame}, "放一起": {t: tSame},
	"不同": {t: tDiff}, "不同的": {t: tDiff}, "分开": {t: tDiff}, "隔开": {t: tDiff}, "远离": {t: tDiff},
	"分散": {t: tSpread}, "打散": {t: tSpread}, "附近": {t: tNear}, "靠近": {t: tNear}, "或": {t: tOr}, "或者": {t: tOr},
	// scopes
	"节点": {t: tScopeNode}, "机器": {t: tScopeNode}, "主机": {t: tScopeNode}, "服务器": {t: tScopeNode},
	"区域": {t: tScopeZone}, "可用区": {t: tScopeZone}, "站点": {t: tScopeZone}, "地区": {t: tScopeZone},
	"区": {t: tScopeZone}, "机房": {t: tScopeZone},
	"每个": {t: tPer}, "每台": {t: tPer}, "每": {t: tPer}, "单个": {t: tPer},
	// thresholds
	"最多": {t: tAtMost}, "至多": {t: tAtMost}, "不超过": {t: tAtMost}, "不多于": {t: tAtMost},
	"低于": {t: tUnder}, "以下": {t: tUnder}, "小于": {t: tUnder}, "少于": {t: tUnder}, "不高于": {t: tUnder},
	"以内": {t: tUnder}, "高于": {t: tAbove}, "超过": {t: tAbove}, "大于": {t: tAbove}, "多于": {t: tAbove}, "以上": {t: tAbove},
	"百分之":   {t: tPercentWord},
	"克每千瓦时": {t: tCarbonUnit}, "克/千瓦时": {t: tCarbonUnit}, "克二氧化碳每千瓦时": {t: tCarbonUnit},
	"克": {t: tCarbonUnit},
	"点": {t: tOClock}, "时整": {t: tOClock}, "点钟": {t: tOClock},
	"早上": {t: tAM}, "上午": {t: tAM}, "凌晨": {t: tAM}, "下午": {t: tPM},
	"和": {t: tAnd}, "与": {t: tAnd}, "跟": {t: tAnd}, "及": {t: tAnd}, "以及": {t: tAnd}, "、": {t: tAnd}, "同时": {t: tFiller},
	// resources and carbon
	"CPU": {t: tCPU}, "使用率": {t: tCPU}, "利用率": {t: tCPU}, "处理器": {t: tCPU}, "CPU使用率": {t: tCPU},
	"电网": {t: tCarbonWord}, "碳排放": {t: tCarbonWord}, "碳强度": {t: tCarbonWord}, "电力": {t: tCarbonWord},
	"碳排放强度": {t: tCarbonWord}, "电": {t: tCarbonWord},
	"低碳": {t: tLowCarbon}, "清洁": {t: tLowCarbon}, "绿色": {t: tLowCarbon}, "更清洁": {t: tLowCarbon},
	"高碳": {t: tHighCarbon}, "煤电": {t: tHighCarbon}, "燃煤": {t: tHighCarbon}, "高排放": {t: tHighCarbon},
	"晚上": {t: tNight}, "夜间": {t: tNight}, "夜里": {t: tNight}, "夜晚": {t: tNight}, "半夜": {t: tNight},
	"白天": {t: tDay}, "日间": {t: tDay},
	// pods
	"副本": {t: tReplica}, "实例": {t: tReplica},
	"GPU": {t: tGPU}, "GPU任务": {t: tGPU}, "GPU作业": {t: tGPU}, "GPU负载": {t: tGPU}, "显卡": {t: tGPU},
	"GPU卡": {t: tGPU}, "GPU的任务": {t: tGPU},
	"服务": {t: tServiceMarker}, "应用": {t: tServiceMarker},
	"所有": {t: tAll}, "全部": {t: tAll}, "所有Pod": {t: tAll}, "所有任务": {t: tAll}, "所有负载": {t: tAll},
	"任务": {t: tFiller}, "Pod": {t: tFiller}, "作业": {t: tFiller}, "工作负载": {t: tFiller},
	"架构": {t: tFiller}, "板": {t: tFiller}, "板卡": {t: tFiller}, "型号": {t: tFiller},
}
