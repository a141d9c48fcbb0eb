import{a,b}from"./chunk-IUJ4HSDY.js";import"./chunk-E3PVPKAK.js";export{b as sessionsPage,a as usageBySession};
