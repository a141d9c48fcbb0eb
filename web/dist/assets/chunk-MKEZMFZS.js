import{a,b}from"./chunk-FUURXJVJ.js";import"./chunk-E3PVPKAK.js";export{b as sessionsPage,a as usageBySession};
