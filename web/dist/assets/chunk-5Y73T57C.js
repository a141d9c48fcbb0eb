import{a,b}from"./chunk-ZKWNZFGM.js";import"./chunk-E3PVPKAK.js";export{b as sessionsPage,a as usageBySession};
